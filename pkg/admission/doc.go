// Package admission is the contract's logic over a backend.Store (DESIGN
// §2–§5): it validates and canonicalises inputs once, admits them, and
// drains a session's FIFO under its drain lease, deciding at execution time
// whether each admission runs as a turn (the handler process) or is written
// as a note, and which transcript it is delivered to.
//
// Stores make no policy decisions; everything that depends on the contract's
// rules (turn or note, target resolution, unknown-admission policy, retries
// and deferrals) lives here so that every store behaves the same.
package admission
