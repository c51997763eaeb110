// Package admission is the contract's logic over a backend.Store (docs/contract.md
// §2–§5): it validates and canonicalises inputs once, admits them, and
// drains a session's FIFO under its drain lease, deciding at execution time
// whether each admission runs as a turn (the handler process) or is written
// as a note, and which transcript it is delivered to.
//
// Stores make no policy decisions; everything that depends on the contract's
// rules (turn or note, target resolution, unknown-admission policy, retries
// and deferrals) lives here so that every store behaves the same.
//
// Choices made where the contract is silent:
//
//   - Payloads: duplicate object keys are refused (parsers disagree on which
//     wins); numbers are kept as written; strings keep their UTF-8 and only
//     the escapes JSON requires; an escaped lone surrogate becomes U+FFFD.
//     Nesting deeper than 1000 levels is refused.
//   - An offer naming the same identity twice carries it once.
//   - Text and payload given together are refused, not merged.
//   - The handler's reply is its stdout without trailing newlines (as the
//     shell's $(…)). A handler that cannot be started is a configuration
//     error (ErrInvalid): the admission is given back to the queue unspent.
//     A turn still running Grace after ctx ended is killed and settled
//     interrupted. A turn is judged when the handler exits (its process
//     group is killed then; its output is read for at most a second more).
//   - On Linux a handler is started by a supervisor process, the running
//     binary started again once per process (supervisor_linux.go; any
//     binary importing this package can be it), which kills it at the lease
//     deadline whether or not the drainer is scheduled, and when the
//     drainer dies.
//   - A misroute is settled failed with error "misrouted" and no mode (it
//     never ran).
//   - A target lookup that fails other than transiently is a bug: the error
//     wraps backend.ErrInternal first (exit 1), whatever code it carries,
//     and the admission stays queued.
//   - An unknown admission resolved by the requeue or interrupt policy is
//     logged, not listed in DrainReport.Executed (this drain did not run it).
//   - Without Follow, Drain gives up after 10 consecutive deferrals (about
//     35 s of backoff) and returns the ErrUnavailable error, the admission
//     still queued, so cron drains do not hang on a store that stays down.
//   - DrainAll applies Max to each session, never waits for a held lease,
//     and reports skipped sessions through Log.
package admission
