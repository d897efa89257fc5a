package pagewise

// sysUserfaultfd is userfaultfd(2)'s number (see sysnum_linux_amd64.go).
const sysUserfaultfd = 282
