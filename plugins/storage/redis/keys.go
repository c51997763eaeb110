package redis

import "strings"

// Every Redis key of the store is built here, one function per key. The keys
// of a session share the hash tag {<session>}, so every script runs on one
// Cluster slot. The global lookups (admission id, transcript id, identity →
// sessions, the session index) are single keys written outside the scripts,
// idempotently, before the script that needs them; a lookup through them
// always verifies the entry against the session's own keys.

type keys struct{ prefix string }

func (k keys) tag(session string) string { return k.prefix + ":{" + session + "}:" }

// session: hash of the session's fields (owner, current, epoch, generation,
// next_seq, created_at, lease_holder, lease_expires_at, tcount).
func (k keys) session(s string) string { return k.tag(s) + "session" }

// grants: hash principal → grant JSON {"role","producers"}: the principals
// besides the owner and what they may do.
func (k keys) grants(s string) string { return k.tag(s) + "grants" }

// admissions: hash admission id → record (JSON, mutable fields).
func (k keys) admissions(s string) string { return k.tag(s) + "admissions" }

// payloads: hash admission id → canonical payload (immutable).
func (k keys) payloads(s string) string { return k.tag(s) + "payloads" }

// identityLists: hash admission id → its identities joined by NUL (byte-exact).
func (k keys) identityLists(s string) string { return k.tag(s) + "identity_lists" }

// seqs: sorted set of every admission id by seq.
func (k keys) seqs(s string) string { return k.tag(s) + "seqs" }

// queued: sorted set of queued admission ids by seq; the head is the first.
func (k keys) queued(s string) string { return k.tag(s) + "queued" }

// running and unknown: sets of admission ids in those statuses.
func (k keys) running(s string) string { return k.tag(s) + "running" }
func (k keys) unknown(s string) string { return k.tag(s) + "unknown" }

// identities: hash identity → id of the admission of the session holding it.
func (k keys) identities(s string) string { return k.tag(s) + "identities" }

// requests: hash principal NUL request id → admission id.
func (k keys) requests(s string) string { return k.tag(s) + "requests" }

// transcripts: hash transcript id → record (JSON) of the session's transcripts.
func (k keys) transcripts(s string) string { return k.tag(s) + "transcripts" }

// messages: list of a transcript's messages (JSON without seq; seq = index+1).
func (k keys) messages(s, transcript string) string { return k.tag(s) + "messages:" + transcript }

// viewers: sorted set viewer id → expiry (unix ms); viewerExpiry: hash viewer
// id → expiry (unix ns, exact).
func (k keys) viewers(s string) string      { return k.tag(s) + "viewers" }
func (k keys) viewerExpiry(s string) string { return k.tag(s) + "viewer_expiry" }

// admins: set of the principals with the store-wide admin right (one key,
// read outside the session scripts: the admin right is checked when the
// principal is resolved, not in a session's write).
func (k keys) admins() string { return k.prefix + ":admins" }

// all is the SCAN/KEYS pattern of every key of the store: the prefix
// escaped (globEscape), so a prefix such as "h*" matches itself only,
// never another prefix's keys.
func (k keys) all() string { return globEscape(k.prefix) + ":*" }

// globEscape escapes the characters Redis glob patterns (SCAN MATCH, KEYS)
// give a meaning: * ? [ ] and the backslash itself.
func globEscape(s string) string {
	if !strings.ContainsAny(s, `*?[]\`) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// changes: the pub/sub channel scripts publish a changed session's id on.
func (k keys) changes() string { return k.prefix + ":changes" }

// sessionIndex: sorted set (score 0, lexical order) of session ids.
func (k keys) sessionIndex() string { return k.prefix + ":sessions" }

// admissionOwner: admission id → "<session id> <claimed at, ns>" (a bare
// session id in stores written before claims carried their time).
func (k keys) admissionOwner(id string) string { return k.prefix + ":admission:{" + id + "}" }

// transcriptOwner: transcript id → "<session> <claimed at>"; claimed with
// SET NX so transcript ids are unique across sessions.
func (k keys) transcriptOwner(t string) string { return k.prefix + ":transcript:{" + t + "}" }

// identityOwners: set of the sessions that may hold identity.
func (k keys) identityOwners(identity string) string {
	return k.prefix + ":identity:{" + identity + "}"
}
