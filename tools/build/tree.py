#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Prepare the kernel tree this project builds, and export our work as a series.

The repository mirrors the kernel tree: new files sit at their kernel paths
(rust/, mm/, include/, samples/, Documentation/, ...), and the few edits to
existing kernel files are unified diffs in patches/.  patches/series lists the
logical changes, in order; each names the new files and the diffs it carries.

  tree.py prepare   extract Debian's linux-source-6.12 into build/linux (once),
                    then resync the overlay and the patched files.  Only files
                    whose content changed are written, so kbuild rebuilds
                    incrementally.  With --git, also record the pristine tree
                    in git as tag 'pristine' (once; export does it too), so
                    that 'git diff' in build/linux shows our changes.
  tree.py export    write out/series/*.patch: one commit per series entry on
                    top of the pristine tree, 'git format-patch' output, and
                    check that 'git am' applies it to a pristine clone.
  tree.py verify    check that patches/series covers every overlay file and
                    every diff exactly once (run by export and prepare).
  tree.py self-test check prepare's snapshot and the later git record on a
                    small tree of its own (the host tier runs it).

Only the directories in OVERLAY_DIRS are ever copied into the kernel tree;
top-level files of this repository (Makefile, README.md, ...) never are.
"""

import argparse
import glob
import hashlib
import os
import shutil
import stat
import subprocess
import sys
import tempfile

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
KSRC = os.path.join(REPO, "build", "linux")
PATCH_DIR = os.path.join(REPO, "patches")
SERIES = os.path.join(PATCH_DIR, "series")
STATE = os.path.join(KSRC, ".rsmm-state")
# The snapshot of the pristine tree that prepare needs (ensure_tree).
PRISTINE_REL = ".rsmm-pristine"
PRISTINE = os.path.join(KSRC, PRISTINE_REL)
PRISTINE_LIST = os.path.join(PRISTINE, "files")
# The snapshot's copies end in this, so that nothing that walks the kernel
# tree for sources ('make rustfmt' finds every *.rs under it) takes them
# for files of the tree.
PRISTINE_SUFFIX = ".pristine"
OVERLAY_DIRS = ["Documentation", "arch", "include", "init", "kernel", "lib",
                "mm", "rust", "samples"]
AUTHOR = "Rust MM developers <rust-mm@example.org>"


class TreeError(Exception):
    pass


def run(cmd, cwd=None, capture=False, env=None, input_data=None):
    res = subprocess.run(cmd, cwd=cwd, env=env, input=input_data,
                         stdout=subprocess.PIPE if capture else None,
                         stderr=subprocess.PIPE if capture else None)
    if res.returncode != 0:
        err = res.stderr.decode(errors="replace") if capture and res.stderr else ""
        raise TreeError("command failed (%d): %s\n%s" % (res.returncode, " ".join(cmd), err))
    return res.stdout


def git(args, cwd=None, capture=True, env=None, input_data=None):
    return run(["git", "-c", "core.quotepath=off"] + args, cwd=cwd or KSRC,
               capture=capture, env=env, input_data=input_data)


def overlay_files():
    """Files of ours that go into the kernel tree, relative paths."""
    files = []
    for d in OVERLAY_DIRS:
        top = os.path.join(REPO, d)
        for root, dirs, names in os.walk(top):
            dirs[:] = [x for x in dirs if not x.startswith(".") and x != "target"]
            for n in names:
                if n.endswith((".orig", ".rej", "~")) or n.startswith(".#"):
                    continue
                files.append(os.path.relpath(os.path.join(root, n), REPO))
    return sorted(files)


def parse_series():
    """Parses patches/series into a list of entries.

    Format: blocks separated by a line '---'.  Each block has header lines
    'Subject:', 'Files:' and 'Patches:' (space-separated, may repeat), then
    'Body:' followed by the commit message body up to the end of the block.
    """
    if not os.path.exists(SERIES):
        raise TreeError("missing %s" % SERIES)
    entries = []
    with open(SERIES, encoding="utf-8") as f:
        text = f.read()
    for n, block in enumerate(text.split("\n---\n")):
        lines = [l for l in block.strip("\n").split("\n")]
        lines = [l for l in lines if not l.startswith("#")]
        if not any(l.strip() for l in lines):
            continue
        e = {"subject": None, "files": [], "patches": [], "body": []}
        in_body = False
        for l in lines:
            if in_body:
                e["body"].append(l)
            elif l.startswith("Subject:"):
                e["subject"] = l[len("Subject:"):].strip()
            elif l.startswith("Files:"):
                e["files"] += l[len("Files:"):].split()
            elif l.startswith("Patches:"):
                e["patches"] += l[len("Patches:"):].split()
            elif l.startswith("Body:"):
                in_body = True
            elif l.strip():
                raise TreeError("series entry %d: unexpected line %r" % (n + 1, l))
        if not e["subject"]:
            raise TreeError("series entry %d has no Subject:" % (n + 1))
        e["body"] = "\n".join(e["body"]).strip("\n")
        if not e["body"]:
            raise TreeError("series entry '%s' has no Body:" % e["subject"])
        entries.append(e)
    return entries


def verify(entries, strict=True):
    """Checks that the series covers every overlay file and diff once.

    Files missing from the series are an error when exporting; while
    developing (prepare) they only draw a warning.
    """
    files = set(overlay_files())
    seen = {}
    for e in entries:
        for f in e["files"]:
            if f in seen:
                raise TreeError("%s is listed twice in patches/series" % f)
            if f not in files:
                raise TreeError("patches/series names %s, which is not an overlay file" % f)
            seen[f] = e["subject"]
        for p in e["patches"]:
            if p in seen:
                raise TreeError("patch %s is listed twice in patches/series" % p)
            if not os.path.exists(os.path.join(PATCH_DIR, p)):
                raise TreeError("patches/series names missing patch %s" % p)
            seen[p] = e["subject"]
    missing = sorted(files - set(seen))
    if missing:
        msg = "overlay files not in any patches/series entry: " + ", ".join(missing)
        if strict:
            raise TreeError(msg)
        print("tree: warning: " + msg, file=sys.stderr)
    stray = sorted(set(os.path.basename(p) for p in glob.glob(os.path.join(PATCH_DIR, "*.patch")))
                   - set(seen))
    if stray:
        raise TreeError("patches not listed in patches/series: " + ", ".join(stray))


def patched_paths(patch):
    paths = []
    with open(patch, encoding="utf-8") as f:
        for line in f:
            if line.startswith("+++ "):
                p = line[4:].strip().split("\t")[0]
                if p == "/dev/null":
                    continue
                if p.startswith("b/"):
                    p = p[2:]
                paths.append(p)
    return paths


TARBALLS = "/usr/src/linux-source-6.12.tar.*"


def kernel_tarball():
    tars = sorted(glob.glob(TARBALLS))
    if not tars:
        raise TreeError("no %s: run 'make setup' (apt-get install linux-source-6.12)"
                        % TARBALLS)
    return tars[-1]


def extract(where):
    """Extracts the kernel tarball into a new directory under where and
    returns the path of the kernel tree in it (its parent is temporary)."""
    tarball = kernel_tarball()
    tmp = tempfile.mkdtemp(prefix="linux-extract.", dir=where)
    print("tree: extracting %s" % tarball, flush=True)
    run(["tar", "-xf", tarball, "-C", tmp])
    subdirs = os.listdir(tmp)
    if len(subdirs) != 1:
        raise TreeError("unexpected tarball layout in %s" % tarball)
    return os.path.join(tmp, subdirs[0])


def file_mode(path):
    """Git's mode of a file: 120000 (symlink), 100755 or 100644."""
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode):
        return "120000"
    return "100755" if st.st_mode & 0o111 else "100644"


def ensure_tree():
    """Extracts the kernel into KSRC, once, with a snapshot of what
    prepare needs of the pristine tree (PRISTINE): the list of its files
    and copies of the files our diffs change.  Recording the whole tree in
    git (ensure_git) took 18 of the 26 s of an extraction, on the path of
    every cold make test, which needs none of it."""
    if os.path.isdir(KSRC):
        if os.path.isdir(os.path.join(KSRC, ".git")) or os.path.isfile(PRISTINE_LIST):
            # A snapshot made before its copies had their suffix.
            for root, _, names in os.walk(os.path.join(PRISTINE, "tree")):
                for n in names:
                    if not n.endswith(PRISTINE_SUFFIX):
                        os.rename(os.path.join(root, n),
                                  os.path.join(root, n + PRISTINE_SUFFIX))
            return
        raise TreeError("%s exists but is not a prepared tree; remove it "
                        "(make distclean) and run again" % KSRC)
    parent = os.path.dirname(KSRC)
    st = os.statvfs(parent if os.path.exists(parent) else REPO)
    if st.f_bavail * st.f_frsize < 8 << 30:
        raise TreeError("less than 8 GiB free under %s: the kernel tree and builds need more"
                        % parent)
    os.makedirs(parent, exist_ok=True)
    src = extract(parent)
    lines = []
    for root, dirs, names in os.walk(src):
        dirs.sort()
        for n in sorted(names) + [d for d in dirs if os.path.islink(os.path.join(root, d))]:
            full = os.path.join(root, n)
            lines.append("%s %s" % (file_mode(full), os.path.relpath(full, src)))
    for p in glob.glob(os.path.join(PATCH_DIR, "*.patch")):
        for rel in patched_paths(p):
            if os.path.isfile(os.path.join(src, rel)):
                copy = os.path.join(src, PRISTINE_REL, "tree", rel + PRISTINE_SUFFIX)
                os.makedirs(os.path.dirname(copy), exist_ok=True)
                shutil.copyfile(os.path.join(src, rel), copy)
    with open(os.path.join(src, PRISTINE_REL, "files"), "w", encoding="utf-8") as f:
        f.write("\n".join(sorted(lines)) + "\n")
    os.rename(src, KSRC)
    os.rmdir(os.path.dirname(src))


def ensure_git():
    """Records the pristine tree in KSRC's git as tag 'pristine', once:
    export needs it, and so does editing an existing kernel file in
    build/linux ('git diff' gives the new diff).  The tree is recorded
    from a second extraction of the tarball, not from KSRC, whose files
    prepare has changed since; 'git reset' then compares KSRC with it."""
    if os.path.isdir(os.path.join(KSRC, ".git")):
        return
    ensure_tree()
    src = extract(os.path.dirname(KSRC))
    try:
        print("tree: recording the pristine tree in git (once)", flush=True)
        git(["init", "-q", "-b", "pristine-base"], cwd=src)
        git(["add", "-A", "-f", "."], cwd=src)
        version = run(["make", "-s", "kernelversion"], cwd=src, capture=True).decode().strip()
        env = dict(os.environ, GIT_AUTHOR_NAME="Debian linux-source-6.12",
                   GIT_AUTHOR_EMAIL="debian-kernel@lists.debian.org",
                   GIT_COMMITTER_NAME="rsmm tree.py", GIT_COMMITTER_EMAIL="rsmm@localhost",
                   GIT_AUTHOR_DATE="2000-01-01T00:00:00Z",
                   GIT_COMMITTER_DATE="2000-01-01T00:00:00Z")
        git(["commit", "-q", "-m", "Linux %s (Debian linux-source-6.12, pristine)" % version],
            cwd=src, env=env)
        git(["tag", "pristine"], cwd=src)
        os.rename(os.path.join(src, ".git"), os.path.join(KSRC, ".git"))
        git(["reset", "-q"])
    finally:
        shutil.rmtree(os.path.dirname(src), ignore_errors=True)


def write_if_changed(dst, data, changed, mode=None):
    """Writes data to dst unless it holds it already; with mode, also
    gives dst that mode (a patched kernel script stays executable)."""
    try:
        with open(dst, "rb") as f:
            if f.read() == data:
                if mode is not None and os.stat(dst).st_mode & 0o777 != mode:
                    os.chmod(dst, mode)
                return
    except FileNotFoundError:
        pass
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    tmp = dst + ".rsmm-tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    if mode is not None:
        os.chmod(tmp, mode)
    os.replace(tmp, dst)
    changed.append(os.path.relpath(dst, KSRC))


_pristine_files = None


def pristine_files():
    """Path -> git mode of every file of the pristine tree: the snapshot's
    list, or in a tree prepared before there was one, one 'git ls-tree'
    (a 'git show' per overlay file took most of a resync)."""
    global _pristine_files
    if _pristine_files is None:
        files = {}
        if os.path.isfile(PRISTINE_LIST):
            with open(PRISTINE_LIST, encoding="utf-8") as f:
                for line in f:
                    mode, path = line.rstrip("\n").split(" ", 1)
                    files[path] = mode
        else:
            for rec in git(["ls-tree", "-r", "-z", "pristine"]).split(b"\0"):
                if rec:
                    meta, path = rec.split(b"\t", 1)
                    files[path.decode()] = meta.split()[0].decode()
        _pristine_files = files
    return _pristine_files


def pristine_blob(path):
    """The pristine content of path, None if the pristine tree has no such
    file: the snapshot's copy, else git's (recorded now if need be: a diff
    new since the extraction changes a file the snapshot has no copy of)."""
    if path not in pristine_files():
        return None
    copy = os.path.join(PRISTINE, "tree", path + PRISTINE_SUFFIX)
    if os.path.isfile(copy):
        with open(copy, "rb") as f:
            return f.read()
    ensure_git()
    return git(["show", "pristine:" + path])


def pristine_mode(path):
    """Permission bits of path in the pristine tree (0o755 or 0o644)."""
    return 0o755 if pristine_files().get(path) == "100755" else 0o644


def prepare(entries, record_git=False):
    ensure_tree()
    if record_git:
        ensure_git()
    changed = []
    old = set()
    if os.path.exists(STATE):
        with open(STATE, encoding="utf-8") as f:
            old = set(l.strip() for l in f if l.strip())

    # New files of ours.
    files = overlay_files()
    for rel in files:
        if rel in pristine_files():
            raise TreeError("%s exists in the pristine kernel: change it with a diff in "
                            "patches/, not by overlaying a copy" % rel)
        with open(os.path.join(REPO, rel), "rb") as f:
            write_if_changed(os.path.join(KSRC, rel), f.read(), changed)

    # Existing kernel files we edit: pristine content plus our diffs, in series order.
    patched = []
    with tempfile.TemporaryDirectory(prefix="rsmm-stage.") as stage:
        for e in entries:
            for p in e["patches"]:
                pfile = os.path.join(PATCH_DIR, p)
                for rel in patched_paths(pfile):
                    if rel in files:
                        raise TreeError("%s patches %s, which is our own file: edit it directly"
                                        % (p, rel))
                    if rel not in patched:
                        blob = pristine_blob(rel)
                        if blob is None:
                            raise TreeError("%s patches %s, which is not in the pristine tree"
                                            % (p, rel))
                        os.makedirs(os.path.dirname(os.path.join(stage, rel)), exist_ok=True)
                        with open(os.path.join(stage, rel), "wb") as f:
                            f.write(blob)
                        patched.append(rel)
                res = subprocess.run(["git", "apply", "--whitespace=nowarn", pfile], cwd=stage,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
                if res.returncode != 0:
                    raise TreeError("patch %s does not apply:\n%s"
                                    % (p, res.stdout.decode(errors="replace")))
        for rel in patched:
            with open(os.path.join(stage, rel), "rb") as f:
                write_if_changed(os.path.join(KSRC, rel), f.read(), changed,
                                 pristine_mode(rel))

    # Files we owned before but no longer: back to pristine, or gone.
    for rel in sorted(old - set(files) - set(patched)):
        blob = pristine_blob(rel)
        dst = os.path.join(KSRC, rel)
        if blob is None:
            if os.path.exists(dst):
                os.unlink(dst)
                changed.append(rel + " (removed)")
        else:
            write_if_changed(dst, blob, changed, pristine_mode(rel))

    with open(STATE, "w", encoding="utf-8") as f:
        f.write("\n".join(sorted(set(files) | set(patched))) + "\n")
    if changed:
        print("tree: updated %d file(s): %s" % (len(changed), " ".join(changed[:12]) +
                                               (" ..." if len(changed) > 12 else "")))
    else:
        print("tree: up to date")


def export(entries, outdir):
    ensure_git()
    outdir = os.path.abspath(outdir)
    work = tempfile.mkdtemp(prefix="rsmm-series.")
    try:
        git(["clone", "-q", "--shared", "--no-checkout", KSRC, work], cwd=REPO)
        git(["checkout", "-q", "-b", "rsmm-series", "pristine"], cwd=work)
        name, email = AUTHOR.rsplit(" <", 1)
        env = dict(os.environ, GIT_AUTHOR_NAME=name, GIT_AUTHOR_EMAIL=email[:-1],
                   GIT_COMMITTER_NAME=name, GIT_COMMITTER_EMAIL=email[:-1])
        for e in entries:
            for rel in e["files"]:
                dst = os.path.join(work, rel)
                os.makedirs(os.path.dirname(dst), exist_ok=True)
                shutil.copyfile(os.path.join(REPO, rel), dst)
                if os.access(os.path.join(REPO, rel), os.X_OK):
                    os.chmod(dst, 0o755)
            for p in e["patches"]:
                git(["apply", "--whitespace=nowarn", os.path.join(PATCH_DIR, p)], cwd=work)
            # Debian's tarball ships a .gitignore that ignores everything at
            # the top level, so new files are added by name.
            if e["files"]:
                git(["add", "-f", "--"] + e["files"], cwd=work)
            git(["add", "-u"], cwd=work)
            msg = "%s\n\n%s\n" % (e["subject"], e["body"])
            git(["commit", "-q", "-s", "-F", "-"], cwd=work, env=env, input_data=msg.encode())
        if os.path.isdir(outdir):
            for old in glob.glob(os.path.join(outdir, "*.patch")):
                os.unlink(old)
        os.makedirs(outdir, exist_ok=True)
        git(["format-patch", "-q", "--no-signature", "-o", outdir, "pristine..rsmm-series"],
            cwd=work)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    # Prove the series applies with 'git am' to a pristine clone.
    check = tempfile.mkdtemp(prefix="rsmm-am.")
    try:
        git(["clone", "-q", "--shared", "--no-checkout", KSRC, check], cwd=REPO)
        git(["checkout", "-q", "-b", "am-check", "pristine"], cwd=check)
        patches = sorted(glob.glob(os.path.join(outdir, "*.patch")))
        git(["-c", "user.name=am check", "-c", "user.email=am@localhost", "am", "-q"] + patches,
            cwd=check)
        print("tree: exported %d patch(es) to %s; 'git am' applies them to the pristine tree"
              % (len(patches), os.path.relpath(outdir, REPO)))
    finally:
        shutil.rmtree(check, ignore_errors=True)


def self_test():
    """Checks prepare's pristine snapshot and the git record made later on
    a small kernel tree of its own (no kernel build); prints a cargo-style
    result line and returns the number of failed checks."""
    global REPO, KSRC, PATCH_DIR, SERIES, STATE, PRISTINE, PRISTINE_LIST, TARBALLS
    global _pristine_files
    saved = (REPO, KSRC, PATCH_DIR, SERIES, STATE, PRISTINE, PRISTINE_LIST, TARBALLS)
    checks = []

    def check(name, ok):
        print("tree self-test: %s %s" % ("ok  " if ok else "FAIL", name))
        checks.append(ok)

    def write(path, text, mode=0o644):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(path, mode)

    def read(path):
        with open(path, encoding="utf-8") as f:
            return f.read()

    def diff(rel, old, new):
        return ("--- a/%s\n+++ b/%s\n@@ -1 +1 @@\n-%s\n+%s\n" % (rel, rel, old, new))

    def series(patches):
        return "".join("Subject: %s\nFiles:%s\nPatches: %s\nBody:\n%s.\n---\n"
                       % (p, " mm/new.c" if i == 0 else "", p, p)
                       for i, p in enumerate(patches))

    def reprepare(entries_text):
        global _pristine_files
        _pristine_files = None
        with open(SERIES, "w", encoding="utf-8") as f:
            f.write(entries_text)
        entries = parse_series()
        verify(entries, strict=False)
        prepare(entries)

    tmp = tempfile.mkdtemp(prefix="tree-self-test.")
    try:
        # A kernel of three files, in a tarball as Debian ships it.
        kernel = os.path.join(tmp, "src", "linux-source-6.12")
        write(os.path.join(kernel, "Makefile"), "kernelversion:\n\t@echo 6.12.0\n")
        write(os.path.join(kernel, "mm", "a.c"), "a\n")
        write(os.path.join(kernel, "mm", "b.c"), "b\n")
        write(os.path.join(kernel, "scripts", "x.sh"), "x\n", 0o755)
        TARBALLS = os.path.join(tmp, "linux-source-6.12.tar.*")
        run(["tar", "-cJf", os.path.join(tmp, "linux-source-6.12.tar.xz"), "-C",
             os.path.join(tmp, "src"), "linux-source-6.12"])
        REPO = os.path.join(tmp, "repo")
        KSRC = os.path.join(REPO, "build", "linux")
        PATCH_DIR = os.path.join(REPO, "patches")
        SERIES = os.path.join(PATCH_DIR, "series")
        STATE = os.path.join(KSRC, ".rsmm-state")
        PRISTINE = os.path.join(KSRC, PRISTINE_REL)
        PRISTINE_LIST = os.path.join(PRISTINE, "files")
        write(os.path.join(REPO, "mm", "new.c"), "new\n")
        write(os.path.join(PATCH_DIR, "b.patch"), diff("mm/b.c", "b", "b2"))
        write(os.path.join(PATCH_DIR, "x.patch"), diff("scripts/x.sh", "x", "x2"))

        # A first prepare: extracted and resynced, no git record, a
        # snapshot of every pristine file and a copy of each patched one.
        reprepare(series(["b.patch", "x.patch"]))
        check("prepare records no git", not os.path.exists(os.path.join(KSRC, ".git")))
        check("overlay file copied", read(os.path.join(KSRC, "mm", "new.c")) == "new\n")
        check("diff applied", read(os.path.join(KSRC, "mm", "b.c")) == "b2\n")
        check("patched script keeps its mode",
              os.stat(os.path.join(KSRC, "scripts", "x.sh")).st_mode & 0o777 == 0o755)
        check("snapshot lists the pristine files",
              sorted(pristine_files()) == ["Makefile", "mm/a.c", "mm/b.c", "scripts/x.sh"])
        check("snapshot copies a patched file",
              read(os.path.join(PRISTINE, "tree", "mm", "b.c" + PRISTINE_SUFFIX)) == "b\n")
        # A copy named as a source file would be found by what walks the
        # tree for sources ('make rustfmt' took lib.rs's for the tree's).
        check("snapshot copies are not named as sources",
              not any(n.endswith((".c", ".h", ".rs", ".sh"))
                      for _, _, names in os.walk(os.path.join(PRISTINE, "tree"))
                      for n in names))

        # Again, after a diff is dropped: b.c is back to its snapshot copy.
        os.unlink(os.path.join(PATCH_DIR, "b.patch"))
        reprepare(series(["x.patch"]))
        check("dropped diff undone", read(os.path.join(KSRC, "mm", "b.c")) == "b\n")

        # An overlay file must not shadow a pristine one.
        write(os.path.join(REPO, "mm", "a.c"), "shadow\n")
        try:
            reprepare(series(["x.patch"]))
            check("overlay over a pristine file refused", False)
        except TreeError:
            check("overlay over a pristine file refused", True)
        os.unlink(os.path.join(REPO, "mm", "a.c"))

        # A diff new since the extraction changes a file the snapshot has
        # no copy of, which was edited in place meanwhile: its pristine
        # content comes from the git record, made now from the tarball.
        write(os.path.join(KSRC, "mm", "a.c"), "edited\n")
        write(os.path.join(PATCH_DIR, "a.patch"), diff("mm/a.c", "a", "a2"))
        reprepare(series(["x.patch", "a.patch"]))
        check("git recorded when a diff needs it", os.path.isdir(os.path.join(KSRC, ".git")))
        check("new diff applied to the pristine file",
              read(os.path.join(KSRC, "mm", "a.c")) == "a2\n")
        status = git(["status", "--porcelain", "--untracked-files=no"]).decode().split("\n")
        check("git status shows only our diffs",
              sorted(l for l in status if l) == [" M mm/a.c", " M scripts/x.sh"])
    except (TreeError, OSError) as e:
        print("tree self-test: error: %s" % e)
        checks.append(False)
    finally:
        (REPO, KSRC, PATCH_DIR, SERIES, STATE, PRISTINE, PRISTINE_LIST, TARBALLS) = saved
        _pristine_files = None
        shutil.rmtree(tmp, ignore_errors=True)
    failed = checks.count(False)
    print("test result: %s. %d passed; %d failed"
          % ("ok" if not failed else "FAILED", len(checks) - failed, failed))
    return failed


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("command", choices=["prepare", "export", "verify", "self-test"])
    ap.add_argument("--out", default=os.path.join(REPO, "out", "series"),
                    help="output directory for export (default: out/series)")
    ap.add_argument("--git", action="store_true",
                    help="prepare: also record the pristine tree in git now (export "
                         "does it when it first runs)")
    args = ap.parse_args()
    if args.command == "self-test":
        sys.exit(1 if self_test() else 0)
    try:
        entries = parse_series()
        verify(entries, strict=args.command != "prepare")
        if args.command == "prepare":
            prepare(entries, args.git)
        elif args.command == "export":
            export(entries, args.out)
        else:
            print("tree: patches/series covers %d overlay file(s) and %d diff(s) in %d entries"
                  % (len(overlay_files()), sum(len(e["patches"]) for e in entries), len(entries)))
    except TreeError as e:
        print("tree: error: %s" % e, file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
