// Package process supervises the processes behind 'hermesq proc': it runs a
// command and passes signals on to it while keeping the tail of its output
// (run.go, tail.go), waits for processes it did not start and reads their
// command line and start time (watch.go, platform_*.go), and re-executes
// the calling command as a supervisor in a new session that outlives the
// shell, reporting how its start went on a pipe (detach.go).
//
// What a completion records, and where it is recorded, is the command
// line's (internal/cli/proc.go); this package only starts, watches and
// waits.
package process
