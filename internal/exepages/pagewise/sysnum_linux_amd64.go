package pagewise

// sysUserfaultfd is userfaultfd(2)'s number (golang.org/x/sys/unix has it, but importing it
// would run the init of package aftersyscall, which imports this one, about 60 inits later).
const sysUserfaultfd = 323
