package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// child is one running epoch.
type child struct {
	epoch int
	cmd   *exec.Cmd
}

// exit is a child's end, reported by its waiting goroutine.
type exit struct {
	c    *child
	code int
}

// lockedWriter serialises writes: the restarter and its children's output
// copiers (for writers that are not files) write to the same stream.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// run is main without the process exit.
func run(args []string, stdout, stderr io.Writer) int {
	if _, ok := stdout.(*os.File); !ok {
		stdout = &lockedWriter{w: stdout}
	}
	if _, ok := stderr.(*os.File); !ok {
		stderr = &lockedWriter{w: stderr}
	}
	fs := flag.NewFlagSet("legate-restarter", flag.ContinueOnError)
	fs.SetOutput(stderr)
	termTimeout := fs.Duration("term-timeout", 30*time.Second, "after SIGTERM or SIGINT, how long children may take to exit before they are killed")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: legate-restarter [-term-timeout D] -- legate [legate options]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	command := fs.Args()
	if len(command) == 0 {
		fs.Usage()
		return 2
	}

	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGHUP, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sigs)

	r := &restarter{command: command, stdout: stdout, stderr: stderr, exits: make(chan exit, 8), running: map[*child]bool{}}
	if err := r.start(); err != nil {
		fmt.Fprintf(stderr, "legate-restarter: %v\n", err)
		return 1
	}
	var killAfter <-chan time.Time
	for {
		select {
		case sig := <-sigs:
			switch sig {
			case syscall.SIGHUP:
				if killAfter != nil {
					continue // stopping: no new epoch
				}
				if err := r.start(); err != nil {
					fmt.Fprintf(stderr, "legate-restarter: hot restart: %v\n", err)
				}
			default:
				fmt.Fprintf(stderr, "legate-restarter: caught %v: stopping every child\n", sig)
				r.signalAll(sig)
				if killAfter == nil {
					// Real clock: the restarter is a separate supervisor binary with no components to inject a clock into.
					killAfter = time.After(*termTimeout)
				}
			}
		case <-killAfter:
			fmt.Fprintf(stderr, "legate-restarter: children still running after %v: killing them\n", *termTimeout)
			r.signalAll(syscall.SIGKILL)
			killAfter = nil
		case e := <-r.exits:
			delete(r.running, e.c)
			fmt.Fprintf(stderr, "legate-restarter: epoch %d (pid %d) exited with code %d\n", e.c.epoch, e.c.cmd.Process.Pid, e.code)
			if e.c != r.newest {
				continue
			}
			// The newest is gone: nothing serves any more. Stop the rest
			// and report its code.
			r.signalAll(syscall.SIGTERM)
			r.waitAll(*termTimeout)
			return e.code
		}
	}
}

// restarter owns the children; only run's goroutine touches it.
type restarter struct {
	command        []string
	stdout, stderr io.Writer
	exits          chan exit
	running        map[*child]bool
	newest         *child
	next           int // the next epoch
}

// start runs the next epoch.
func (r *restarter) start() error {
	epoch := r.next
	args := append(append([]string(nil), r.command[1:]...), "--restart-epoch", strconv.Itoa(epoch))
	cmd := exec.Command(r.command[0], args...)
	cmd.Stdout, cmd.Stderr = r.stdout, r.stderr
	cmd.Env = append(os.Environ(), "RESTART_EPOCH="+strconv.Itoa(epoch))
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting epoch %d: %w", epoch, err)
	}
	c := &child{epoch: epoch, cmd: cmd}
	r.next++
	r.running[c] = true
	r.newest = c
	fmt.Fprintf(r.stderr, "legate-restarter: started epoch %d (pid %d)\n", epoch, cmd.Process.Pid)
	go waitChild(c, r.exits)
	return nil
}

// waitChild reports c's exit code.
func waitChild(c *child, exits chan<- exit) {
	err := c.cmd.Wait()
	exits <- exit{c: c, code: exitCode(err)}
}

// exitCode is the shell's view of a process end: its code, or 128+signal.
func exitCode(err error) int {
	if err == nil {
		return 0
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return 1
	}
	if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ee.ExitCode()
}

func (r *restarter) signalAll(sig os.Signal) {
	for c := range r.running {
		c.cmd.Process.Signal(sig)
	}
}

// waitAll waits for every running child, killing those left after timeout.
func (r *restarter) waitAll(timeout time.Duration) {
	// Real clock: the restarter is a separate supervisor binary with no components to inject a clock into.
	deadline := time.After(timeout)
	for len(r.running) > 0 {
		select {
		case e := <-r.exits:
			delete(r.running, e.c)
			fmt.Fprintf(r.stderr, "legate-restarter: epoch %d (pid %d) exited with code %d\n", e.c.epoch, e.c.cmd.Process.Pid, e.code)
		case <-deadline:
			r.signalAll(syscall.SIGKILL)
			deadline = nil
		}
	}
}
