# Console lines never counted as splats although they may match
# tools/build/splat.re: the kernel's echo of its command line, which
# carries test parameters such as sysctl.kernel.hung_task_timeout_secs.
# Same syntax as splat.re; anchored so that nothing else can match.
^ *(\[[^]]*\] *)?(Kernel command line:|Command line:|Unknown kernel command line)
