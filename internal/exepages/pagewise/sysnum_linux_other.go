//go:build linux && !amd64 && !arm64

package pagewise

// sysUserfaultfd 0: Enable is not supported on this architecture (not measured there).
const sysUserfaultfd = 0
