package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/hermesq/hermesq/internal/termtext"
	"github.com/hermesq/hermesq/pkg/admission"
	"github.com/hermesq/hermesq/pkg/backend"
)

// checkRecord checks, before producer's event for session (pinned to
// target, "" for none) is recorded, what would refuse it when producers run
// offers it: the session exists (else exit 3), the caller may admit that
// producer's automation input to it (else exit 7), and the target is a
// transcript (else exit 3) the event would be delivered to now: the
// session's current transcript or one of its compressed ancestors (else exit
// 2: it would be misrouted). A mistake is reported at once, nothing
// recorded, instead of an event that waits in its outbox for what never
// comes.
//
// A store that cannot be reached now (ErrUnavailable: a bbolt file locked
// past --timeout, a Redis server down; or no store where the configuration
// points) does not stop the recording: the outbox is the durable buffer,
// and producers run delivers the event once the store is back. checkRecord then says so on stderr, one line, and
// returns nil. what names the event in that line.
func checkRecord(ctx context.Context, f *Factory, producerName, session, target, what string) error {
	cfg, err := f.Config()
	if err != nil {
		return err
	}
	st, err := f.Store()
	switch {
	case err == nil:
		err = checkRecordOn(ctx, st, cfg.Principal, producerName, session, target)
	case errors.Is(err, backend.ErrNotFound):
		// No store where the configuration points (a bbolt file not
		// created yet, or a handler given no store setting): nothing to
		// check against, and producers run, with its own configuration,
		// may well deliver the event.
		err = fmt.Errorf("%w: %w", err, backend.ErrUnavailable)
	}
	if errors.Is(err, backend.ErrUnavailable) {
		fmt.Fprintf(f.IO.ErrOut, "hermesq: warning: the store cannot be reached, so session %s, its target and the grants are not checked: %s is kept in the %s outbox and producers run delivers it once the store is back (%s)\n",
			termtext.Esc(session), what, producerName, termtext.Esc(termtext.OneLine(err.Error())))
		return nil
	}
	return err
}

// checkRecordOn is checkRecord's check on an open store.
func checkRecordOn(ctx context.Context, st backend.Store, principal, producerName, session, target string) error {
	sess, err := admission.Authorize(ctx, st, session, principal, backend.ActAdmitAutomation, producerName)
	if errors.Is(err, backend.ErrNotFound) {
		return backend.Errorf(backend.ErrNotFound, "session %s does not exist (open it first: hermesq session open %s)", session, session)
	}
	if err != nil {
		return err
	}
	if target == "" {
		return nil
	}
	if _, err := st.GetTranscript(ctx, target); errors.Is(err, backend.ErrNotFound) {
		return backend.Errorf(backend.ErrNotFound, "target %s: no such transcript (session %s's current transcript is %s)",
			target, session, sess.CurrentTranscript)
	} else if err != nil {
		return err
	}
	svc := &admission.Service{Store: st}
	_, misrouted, err := svc.ResolveTarget(ctx, sess, backend.Admission{Session: session, Kind: backend.KindAutomation, PinnedTarget: target})
	if err != nil {
		return err
	}
	if misrouted {
		return backend.Errorf(backend.ErrInvalid,
			"target %s is not in session %s's lineage (its current transcript is %s): the event would be misrouted; give the transcript the work started from, or leave --target out where it is optional",
			target, session, sess.CurrentTranscript)
	}
	return nil
}

// checkPayloadSize refuses an event whose payload alone, canonical as the
// store keeps it, is over the payload limit: the store would refuse it
// whatever group it came in, so it is refused before it is recorded (exit
// 2), never accepted and then left undeliverable. payload is the event's
// payload, or nil for text.
func checkPayloadSize(text string, payload json.RawMessage, limit int) error {
	raw := payload
	if raw == nil {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(struct {
			Text string `json:"text"`
		}{text}); err != nil {
			return err
		}
		raw = buf.Bytes()
	}
	if _, err := admission.Canonical(raw, limit); err != nil {
		if !errors.Is(err, backend.ErrInvalid) {
			return err
		}
		return backend.Errorf(backend.ErrInvalid, "%s (the store refuses it, alone or in any group; payload_limit may be raised up to %d)",
			strings.TrimSuffix(err.Error(), ": "+backend.ErrInvalid.Error()), backend.MaxPayloadLimit)
	}
	return nil
}
