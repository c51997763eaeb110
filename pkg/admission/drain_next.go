package admission

import (
	"context"
	"errors"

	"github.com/hermesq/hermesq/pkg/backend"
)

// Turns back to back. When a turn ends and the next head is due as a turn
// too, the drainer settles the one and claims the other in one store
// operation (Store.SettleClaim: one bbolt commit instead of two), and the
// next step runs the claimed turn without reading the queue again. The
// next head is decided exactly as a step would decide it (decide, against
// the session read just before), and the store claims it only if it is
// still the FIFO head under this drainer's epoch once the settle is done.

// pendingTurn is the next head, decided a turn, then claimed.
type pendingTurn struct {
	sess    backend.Session    // as read when it was decided
	head    backend.Admission  // queued, as read
	target  backend.Transcript // its target, as read before the last turn's settle
	claimed backend.Admission  // running, once claimed
}

// peekTurn reads the queue head behind the running turn (about to be
// settled) and returns it when it is due as a turn and the drain will run
// it: nothing stops the drain first (ctx, the lease, Max). A failed read
// only means no peek: the next step reads and reports.
func (d *drainer) peekTurn(ctx context.Context) *pendingTurn {
	if ctx.Err() != nil || d.lapsing() != nil {
		return nil
	}
	if d.opt.Max > 0 && d.rep.count()+2 > d.opt.Max {
		return nil // cur is the last this drain executes
	}
	sess, err := d.s.Store.GetSession(ctx, d.session, d.s.now())
	if err != nil || sess.Unknown > 0 || sess.Running != 1 {
		return nil // only cur may be running
	}
	heads, err := d.s.Store.ListAdmissions(ctx, d.session, backend.AdmissionFilter{
		Statuses: []backend.Status{backend.StatusQueued}, Limit: 1,
	})
	if err != nil || len(heads) == 0 {
		return nil
	}
	b := heads[0]
	target, misrouted, err := d.s.resolve(ctx, sess, b)
	if err != nil || decide(sess, b, target, misrouted) != execTurn {
		return nil
	}
	return &pendingTurn{sess: sess, head: b, target: target}
}

// settleAndClaim settles a turn (req) and claims p's head in one store
// operation, retrying as fencedWrite would. It returns what the
// settle returned; when the claim succeeded too, p is left in d.next for
// the next step. A claim refused (the head changed meanwhile) only means
// the next step decides afresh.
func (d *drainer) settleAndClaim(ctx context.Context, req backend.SettleRequest, p *pendingTurn) (backend.Admission, error) {
	creq := backend.ClaimRequest{
		Session: d.session, AdmissionID: p.head.ID, Epoch: d.lease.Epoch,
		Mode: backend.ModeTurn, DeliveredTo: p.target.ID, Now: req.Now,
	}
	r, err := d.s.Store.SettleClaim(ctx, req, creq)
	claimErr := r.ClaimErr
	if err != nil {
		if !transient(err) {
			return r.Settled, err // nothing written: ErrMoved is decided again by the caller
		}
		// Either write may have committed with the reply lost: each is
		// sent again on its own, one found already written counted done.
		d.opt.Log("drain %s: settle admission %s and claim %s: %v; retrying each alone", d.session, req.AdmissionID, creq.AdmissionID, err)
		r.Settled, err = d.fencedWrite(ctx, sending(d.s.Store.Settle, req), turnSettled(req),
			fenceOpts{what: "settle admission", id: req.AdmissionID, transientBefore: true})
		if err != nil {
			return r.Settled, err
		}
		r.Claimed, claimErr = d.fencedWrite(ctx, sending(d.s.Store.Claim, creq), claimedBy(creq),
			fenceOpts{what: "claim admission", id: creq.AdmissionID, transientBefore: true})
		if claimErr != nil && !errors.Is(claimErr, backend.ErrNotHead) {
			// The first attempt may have claimed it with its reply lost,
			// and the retries could not tell: never started, it goes back.
			d.giveBackClaim(ctx, creq.AdmissionID)
		}
	}
	if claimErr == nil {
		p.claimed = r.Claimed
		// The target as the claimed turn sees it: with the messages just
		// settled into it.
		for _, m := range req.Messages {
			if m.Transcript == p.target.ID {
				p.target.MessageCount++
				if m.Role == backend.RoleNote {
					p.target.NoteCount++
				}
			}
		}
		d.next = p
	}
	return r.Settled, nil
}

// giveBackClaim gives back a turn whose claim may have committed with its
// reply lost when the retries could not learn it (they ran out, or the
// drain stopped): read with a fresh settle deadline, an admission running
// under this drainer's epoch was claimed by it and never started (the
// drainer starts a turn only from a claim it saw succeed), so it is
// requeued, not left running for the next drainer to find unknown.
func (d *drainer) giveBackClaim(ctx context.Context, id string) {
	bg, cancel := d.settleContext(ctx)
	defer cancel()
	var b backoff
	a, err := d.readAdmission(bg, id, &b)
	if err != nil {
		d.opt.Log("drain %s: give back admission %s (its claim's reply lost): read: %v", d.session, id, err)
		return
	}
	if a.Status != backend.StatusRunning || a.Epoch != d.lease.Epoch {
		return // not claimed, or not by this drainer
	}
	req := backend.SettleRequest{
		Session: d.session, AdmissionID: a.ID, Epoch: a.Epoch, Generation: a.Generation, Now: d.s.now(),
	}
	if _, err := d.fencedWrite(bg, sending(d.s.Store.Requeue, req), requeued,
		fenceOpts{what: "requeue admission", id: req.AdmissionID}); err != nil {
		d.opt.Log("drain %s: give back admission %s (its claim's reply lost): %v", d.session, id, err)
		return
	}
	d.opt.Log("drain %s: admission %s claimed with its reply lost, given back unstarted", d.session, id)
}

// giveBackNext requeues a turn claimed with the last settle that the drain
// did not run (it stopped first): it never started, so it goes back to the
// queue untouched. If the lease is lost meanwhile the requeue is fenced,
// and the next drainer finds it running, like any claim whose drainer
// lost its lease.
func (d *drainer) giveBackNext(ctx context.Context) {
	p := d.next
	if p == nil {
		return
	}
	d.next = nil
	bg, cancel := d.settleContext(ctx)
	defer cancel()
	req := backend.SettleRequest{
		Session: d.session, AdmissionID: p.claimed.ID, Epoch: p.claimed.Epoch, Generation: p.claimed.Generation, Now: d.s.now(),
	}
	_, err := d.fencedWrite(bg, sending(d.s.Store.Requeue, req), requeued,
		fenceOpts{what: "requeue admission", id: req.AdmissionID})
	if err != nil {
		d.opt.Log("drain %s: give back admission %s (claimed, not started): %v", d.session, p.claimed.ID, err)
	}
}
