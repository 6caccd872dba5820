# Console lines never counted as splats although they may match
# tools/build/splat.re: the kernel's echo of its command line, which
# carries test parameters such as sysctl.kernel.hung_task_timeout_secs.
# Same syntax as splat.re; anchored so that nothing else can match.
^ *(\[[^]]*\] *)?(Kernel command line:|Command line:|Unknown kernel command line)
# A kernel without the hung-task detector (the demo's performance kernel)
# cannot apply the runner's sysctl.kernel.hung_task_* parameters and says so.
^ *(\[[^]]*\] *)?Failed to set sysctl parameter 'kernel\.hung_task_[a-z_]+=[0-9]+': parameter not found
