// Package cli is the hermesq command line: the root command and one file
// per command or command group, a Factory holding the I/O streams and lazy
// accessors for the configuration and the store, and the one mapping from
// errors to exit codes (exitcode.go). It holds commands and their plumbing
// only: it parses flags, reads the configuration, opens the store and the
// outboxes, and prints; what supervises, draws or computes lives in a
// package named for it:
//
//   - internal/process: the supervision behind 'proc run' and 'proc watch'
//     (running and waiting for processes, the detached supervisor);
//   - internal/top/tui: the terminal UI of 'top', linked only into
//     hermesq-top (Hosts.Top);
//   - pkg/stats: the figures behind 'stats', 'check' and 'top' (the
//     producers' figures, the check's OK, WARNING or CRITICAL, the
//     Prometheus text), over the queue figures of pkg/admission;
//   - internal/termtext: stored text escaped for a terminal, tables, and
//     the tables of the figures;
//   - internal/producerhost: the host of the producer plugins behind
//     'producers run'.
//
// Shared helpers live in files named for what they do: run.go (how a
// command checks its input, opens the store and runs: storeRun, sessionRun,
// admissionRun), flags.go (flag values shared by commands), output.go (the
// printer and the text shapes of admissions and sessions), complete.go
// (shell completion), progress.go, config.go, factory.go.
//
// When a command goes through pkg/admission and when it calls the store:
//
//   - A command goes through pkg/admission (admission.Service, or its
//     functions such as Authorize) whenever the contract decides something:
//     input validated and canonicalised (admit), turn or note and the
//     delivery target (drain), leases and fencing, derived ids (replay),
//     work spread over many store calls (compact, stats, top), and who may
//     do what.
//   - A command may call backend.Store itself only to read (show, find,
//     queue, sessions, transcript, export, completion), or to perform
//     exactly one store operation that the operator names in full and that
//     involves no decision (session open, close, compress, switch, grant,
//     revoke; resolve; cancel; viewer rm; import) — after checking its
//     command line with the backend validators; the atomicity and the
//     checks of that operation are the store's.
//
// Anything else belongs in pkg/admission first, then here.
package cli
