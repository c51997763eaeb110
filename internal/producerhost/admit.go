package producerhost

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hermesq/hermesq/pkg/admission"
	"github.com/hermesq/hermesq/pkg/backend"
	"github.com/hermesq/hermesq/pkg/producer"
)

// round admits one poll's offers in one batch and settles them. The poll
// is the one the round before started, or one made now. While the store
// admits a full poll's offers (a backlog), the plugin is polled for the
// next round, and the offers are settled while the next round admits;
// a round waits for the settle before it to end first, and ends with that
// settle's error. Without a backlog, a round polls, admits and settles,
// one after the other. It returns how many offers it took.
func (h *Host) round(ctx context.Context, name string, p producer.Producer, st *runState, pl *pipeline) (int, error) {
	var got polled
	if pl.next != nil {
		got = <-pl.next
		pl.next = nil
	} else {
		got = h.poll(ctx, p)
	}
	offers := got.offers
	if got.err != nil || len(offers) == 0 {
		h.Timing.round(name, got.rpc, got.served, 0, 0, 0)
		if err := pl.waitSettle(); err != nil {
			return 0, err
		}
		return 0, got.err
	}
	if ctx.Err() == nil && eventCount(offers) >= PollMax {
		pl.next = make(chan polled, 1)
		go func() { pl.next <- h.poll(ctx, p) }()
	}
	// An admission in flight is finished and settled even when a signal
	// arrives meanwhile: stopping halfway only costs a re-offer later.
	work, wcancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	ins := make([]admission.Input, len(offers))
	for i, o := range offers {
		ins[i] = offerInput(name, h.Principal, o)
	}
	t1 := time.Now()
	results, batchErr := h.Admission.AdmitBatch(work, ins)
	inStore := time.Since(t1)
	if h.AfterAdmit != nil && batchErr == nil {
		h.AfterAdmit()
	}
	admitted := 0
	settlements := make([]producer.Settlement, len(offers))
	for i, o := range offers {
		err := batchErr
		if i < len(results) && results[i].Err != nil {
			err = results[i].Err
		}
		settlements[i] = h.settlement(work, name, o, err, st)
		if settlements[i].Action == producer.Complete {
			admitted += len(o.IdentityList())
		}
	}
	h.Timing.round(name, got.rpc, got.served, inStore, len(offers), admitted)
	if err := pl.waitSettle(); err != nil {
		wcancel()
		return len(offers), err
	}
	settle := func() error {
		defer wcancel()
		rpc, outbox, err := h.settle(work, name, p, offers, settlements)
		h.Timing.calls(name, rpc, outbox)
		return err
	}
	if pl.next == nil { // no backlog: settle before the next poll
		return len(offers), settle()
	}
	done := make(chan error, 1)
	pl.settled = done
	go func() { done <- settle() }()
	return len(offers), nil
}

// polled is the outcome of one poll: its offers or the error that ends the
// round, and the call's time, of which the plugin served served.
type polled struct {
	offers      []producer.Offer
	rpc, served time.Duration
	err         error
}

// poll asks the plugin for up to PollMax events, within the poll deadline.
// A poll cut short by ctx is an empty one.
func (h *Host) poll(ctx context.Context, p producer.Producer) polled {
	served := &producer.Served{}
	pctx, cancel := context.WithTimeout(producer.WithServed(ctx, served), h.Config.PollDeadline)
	defer cancel()
	t0 := time.Now()
	offers, err := p.Poll(pctx, producer.PollRequest{Max: PollMax, PayloadLimit: h.Admission.PayloadLimit()})
	got := polled{rpc: time.Since(t0), served: served.Total()}
	if err == nil {
		got.offers = offers
		return got
	}
	switch {
	case ctx.Err() != nil:
	case pastDeadline(pctx):
		got.err = &deadlineError{call: "poll", key: "producer_poll_deadline", d: h.Config.PollDeadline}
	case errors.Is(err, producer.ErrPermanent):
		got.err = err
	default:
		got.err = &pollError{err}
	}
	return got
}

// pipeline is what one plugin's rounds leave in flight for the next: the
// poll it will admit, and the settle of the round before.
type pipeline struct {
	next    chan polled
	settled chan error
}

// waitSettle waits for the settle in flight, if any, and returns its error.
func (pl *pipeline) waitSettle() error {
	if pl.settled == nil {
		return nil
	}
	err := <-pl.settled
	pl.settled = nil
	return err
}

// finish ends what the plugin's last round left in flight when its run
// ends: a poll already made is admitted and settled, as any admission in
// flight is (no further poll is made), and the last settle is waited for;
// a settle that fails is logged. Claims not settled come back after their
// lease.
func (h *Host) finish(ctx context.Context, name string, p producer.Producer, st *runState, pl *pipeline) {
	if pl.next != nil {
		ended, cancel := context.WithCancel(ctx)
		cancel()
		_, _ = h.round(ended, name, p, st, pl)
	}
	if err := pl.waitSettle(); err != nil {
		h.log.printf(name, "%v", oneLine(err.Error()))
	}
}

// eventCount is how many events the offers hold (one per identity).
func eventCount(offers []producer.Offer) int {
	n := 0
	for _, o := range offers {
		n += len(o.IdentityList())
	}
	return n
}

// pastDeadline reports whether ctx's deadline has passed (the transport
// may fail a call a moment before ctx itself reports it).
func pastDeadline(ctx context.Context) bool {
	dl, ok := ctx.Deadline()
	return errors.Is(ctx.Err(), context.DeadlineExceeded) || ok && !time.Now().Add(50*time.Millisecond).Before(dl)
}

// settlement applies the policy to the store's answer err to offer o (and
// admits the smaller groups of a group over the limit).
func (h *Host) settlement(ctx context.Context, name string, o producer.Offer, err error, st *runState) producer.Settlement {
	r := RefusalOf(err, len(o.Parts))
	d := Decide(r, o.Attempts, h.now(), h.Config.Backoff)
	var delivered []string
	if d.Outcome == Split {
		h.log.printf(name, "%s: %s; offering its events in smaller groups", describeOffer(o), d.Reason)
		delivered, d = h.admitSplit(ctx, name, o, o.Parts)
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	switch d.Outcome {
	case Deliver:
		return producer.Settlement{Action: producer.Complete}
	case Reject:
		st.rejected += len(o.IdentityList()) - len(delivered)
		h.log.printf(name, "rejected %s: %s", describeOffer(o), d.Reason)
		return producer.Settlement{Action: producer.Reject, Reason: d.Reason, Delivered: delivered}
	}
	if r.Code == backend.CodeUnavailable {
		st.unavailable = true
	}
	h.log.printf(name, "%s waits until %s (attempt %d): %s", describeOffer(o), d.NotBefore.UTC().Format(time.RFC3339), o.Attempts, d.Reason)
	return producer.Settlement{Action: producer.Retry, Reason: d.Reason, NotBefore: d.NotBefore, Delivered: delivered}
}

// admitSplit admits parts of offer o in two halves, each split again while
// refused as too large. It returns the identities admitted and the
// decision for the others (Deliver when every part went in); a wait
// outweighs a rejection, so an event that may yet go in is never rejected
// with another.
func (h *Host) admitSplit(ctx context.Context, name string, o producer.Offer, parts []producer.Part) ([]string, Decision) {
	var delivered []string
	rest := Decision{Outcome: Deliver}
	half := len(parts) / 2
	for _, g := range [][]producer.Part{parts[:half], parts[half:]} {
		sub := o
		sub.Identities, sub.Parts = nil, g
		var err error
		results, batchErr := h.Admission.AdmitBatch(ctx, []admission.Input{offerInput(name, h.Principal, sub)})
		switch {
		case batchErr != nil:
			err = batchErr
		case len(results) > 0:
			err = results[0].Err
		}
		d := Decide(RefusalOf(err, len(g)), o.Attempts, h.now(), h.Config.Backoff)
		switch d.Outcome {
		case Deliver:
			delivered = append(delivered, sub.IdentityList()...)
			continue
		case Split:
			var more []string
			more, d = h.admitSplit(ctx, name, o, g)
			delivered = append(delivered, more...)
		}
		if d.Outcome == Wait || d.Outcome == Reject && rest.Outcome == Deliver {
			rest = d
		}
	}
	return delivered, rest
}

// offerInput is the admission input of an offer.
func offerInput(name, principal string, o producer.Offer) admission.Input {
	in := admission.Input{
		Session:    o.Session,
		Target:     o.Target,
		Producer:   name,
		Principal:  principal,
		Identities: o.Identities,
		Text:       o.Text,
		Payload:    o.Payload,
	}
	for _, p := range o.Parts {
		in.Parts = append(in.Parts, admission.Part{Identity: p.Identity, Text: p.Text, Payload: p.Payload})
	}
	return in
}

func describeOffer(o producer.Offer) string {
	ids := o.IdentityList()
	if len(ids) > 3 {
		return fmt.Sprintf("offer for session %q (%d events: %s … %s)", o.Session, len(ids), ids[0], ids[len(ids)-1])
	}
	return fmt.Sprintf("offer for session %q (identities %s)", o.Session, strings.Join(ids, " "))
}
