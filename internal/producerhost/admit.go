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

// round polls the plugin once, admits the offers in one batch and settles
// each. It returns how many offers it took.
func (h *Host) round(ctx context.Context, name string, p producer.Producer, st *runState) (int, error) {
	// Where the round's time goes (Timing): the plugin adds to served
	// what it spent in its producer.
	served := &producer.Served{}
	var rpc, inStore time.Duration
	var offers []producer.Offer
	admitted := 0
	var outbox time.Duration // of the settles
	defer func() { h.Timing.round(name, rpc, served.Total()+outbox, inStore, len(offers), admitted) }()
	pctx, cancel := context.WithTimeout(producer.WithServed(ctx, served), h.Config.PollDeadline)
	t0 := time.Now()
	offers, err := p.Poll(pctx, producer.PollRequest{Max: PollMax, PayloadLimit: h.Admission.PayloadLimit()})
	rpc = time.Since(t0)
	missed := pastDeadline(pctx)
	cancel()
	if err != nil {
		switch {
		case ctx.Err() != nil:
			return 0, nil
		case missed:
			return 0, &deadlineError{call: "poll", key: "producer_poll_deadline", d: h.Config.PollDeadline}
		case errors.Is(err, producer.ErrPermanent):
			return 0, err
		}
		return 0, &pollError{err}
	}
	if len(offers) == 0 {
		return 0, nil
	}
	// An admission in flight is finished and settled even when a signal
	// arrives meanwhile: stopping halfway only costs a re-offer later.
	work, wcancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	defer wcancel()
	ins := make([]admission.Input, len(offers))
	for i, o := range offers {
		ins[i] = offerInput(name, h.Principal, o)
	}
	t1 := time.Now()
	results, batchErr := h.Admission.AdmitBatch(work, ins)
	inStore = time.Since(t1)
	if h.AfterAdmit != nil && batchErr == nil {
		h.AfterAdmit()
	}
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
	calls, inOutbox, err := h.settle(work, name, p, offers, settlements)
	rpc += calls
	outbox += inOutbox
	return len(offers), err
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
