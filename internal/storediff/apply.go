package storediff

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/hermesq/hermesq/pkg/admission"
	"github.com/hermesq/hermesq/pkg/backend"
)

func textPayload(s string) json.RawMessage {
	b, _ := json.Marshal(map[string]string{"text": s})
	return b
}

func (r *Runner) ref(a int) string {
	if len(r.adm) == 0 {
		return "ffffffffffffffffffffffffffffffff" // no such admission
	}
	return r.adm[a%len(r.adm)]
}

func (r *Runner) first(ctx context.Context, sid string, st backend.Status) (backend.Admission, bool) {
	as, err := r.St.ListAdmissions(ctx, sid, backend.AdmissionFilter{Statuses: []backend.Status{st}, Limit: 1})
	if err != nil || len(as) == 0 {
		return backend.Admission{}, false
	}
	return as[0], true
}

// pick is the admission an op names: admission ref a, or (a < 0) the
// session's first in status st; false when there is none.
func (r *Runner) pick(ctx context.Context, sid string, a int, st backend.Status) (string, bool) {
	if a >= 0 {
		return r.ref(a), true
	}
	x, ok := r.first(ctx, sid, st)
	return x.ID, ok
}

// errNothing is the reply of an operation that found nothing to act on.
var errNothing = errors.New("nothing to act on")

func (r *Runner) current(ctx context.Context, sid string) (backend.Session, error) {
	return r.St.GetSession(ctx, sid, r.Clock)
}

func (r *Runner) admitRequest(ctx context.Context, o Op) backend.AdmitRequest {
	sid := sessions[o.S]
	req := backend.AdmitRequest{ID: backend.NewAdmissionID(r.Clock), Session: sid, Principal: principals[o.P], Now: r.Clock}
	switch o.Kind {
	case OpAdmitHuman:
		req.Kind = backend.KindHuman
		if o.R >= 0 {
			req.RequestID = requestIDs[o.R]
		}
		req.Payload = textPayload(o.X)
		req.CreateSession = o.Flag
		req.Reopen = o.N == 1
	case OpAdmitAuto:
		req.Kind = backend.KindAutomation
		req.Producer = "process"
		req.Identities = identityNames(o.Ids)
		if o.Flag {
			for _, id := range req.Identities {
				req.Parts = append(req.Parts, backend.Part{Identity: id, Payload: textPayload(o.X + "/" + id)})
			}
			req.Payload = backend.ComposeParts(req.Parts)
		} else {
			req.Payload = textPayload(o.X)
		}
		switch o.N {
		case 1:
			if s, err := r.current(ctx, sid); err == nil {
				req.PinnedTarget = s.CurrentTranscript
			}
		case 2:
			req.PinnedTarget = "t1"
		}
	case OpAdmitBad:
		req.Kind = backend.KindHuman
		req.Payload = textPayload("bad")
		switch o.N {
		case 0:
			req.Principal = ""
		case 1:
			req.Session = "bad id!"
		case 2:
			req.Kind = backend.KindAutomation
			req.Producer = "process"
		case 3:
			req.Identities = []string{"e1"}
		case 4:
			req.Payload = nil
		case 5:
			req.Kind, req.Producer, req.Identities, req.RequestID = backend.KindAutomation, "process", []string{"e1"}, "r1"
		case 6:
			req.Kind = "robot"
		case 7:
			// An id naming an existing admission, with another payload.
			// Only once one exists: an id never committed, offered again
			// to another session within the orphan age of the lookup a
			// refused offer left, is a conflict on Redis (the lookup is
			// taken to belong to a script still on its way) and new on
			// bbolt; that known divergence is left out here.
			if len(r.adm) > 0 {
				req.ID = r.ref(0)
			}
			req.Payload = textPayload("other")
		case 8:
			req.Kind, req.Producer, req.Identities, req.PinnedTarget = backend.KindAutomation, "process", []string{"e1"}, "bad target!"
		}
	}
	return req
}

func (r *Runner) apply(ctx context.Context, o Op) (any, error) {
	sid := sessions[o.S]
	now := r.Clock
	switch o.Kind {
	case OpOpen:
		s, created, err := r.St.OpenSession(ctx, backend.OpenSessionRequest{ID: sid, Owner: principals[o.P], Now: now})
		return map[string]any{"session": s, "created": created}, err
	case OpAdmitHuman, OpAdmitAuto, OpAdmitBad:
		res, err := r.St.Admit(ctx, []backend.AdmitRequest{r.admitRequest(ctx, o)})
		for _, x := range res {
			r.see(x.Admission)
		}
		return admitViews(res), err
	case OpAdmitBatch:
		var reqs []backend.AdmitRequest
		for _, s := range o.Sub {
			reqs = append(reqs, r.admitRequest(ctx, s))
		}
		res, err := r.St.Admit(ctx, reqs)
		for _, x := range res {
			r.see(x.Admission)
		}
		return admitViews(res), err
	case OpSvcAdmit:
		in := admission.Input{Session: sid, Principal: principals[o.P], Reopen: o.N == 1}
		if len(o.Ids) > 0 {
			in.Producer = "process"
			if o.Flag {
				for _, id := range identityNames(o.Ids) {
					in.Parts = append(in.Parts, admission.Part{Identity: id, Text: o.X + "/" + id})
				}
			} else {
				in.Identities, in.Text = identityNames(o.Ids), o.X
			}
		} else {
			in.Text = o.X
			if o.R >= 0 {
				in.RequestID = requestIDs[o.R]
			}
		}
		res, err := r.Svc.Admit(ctx, in)
		r.see(res.Admission)
		return admitViews([]backend.AdmitResult{res}), err
	case OpGrant:
		return nil, r.St.Grant(ctx, sid, backend.Grant{Principal: principals[o.P], Role: roles[o.N%len(roles)]})
	case OpRevoke:
		return nil, r.St.Revoke(ctx, sid, principals[o.P])
	case OpAcquire:
		who := ""
		if o.P >= 0 {
			who = principals[o.P]
		} else if s, err := r.current(ctx, sid); err == nil {
			who = s.Owner
		}
		return r.St.AcquireLease(ctx, backend.LeaseRequest{Session: sid, Holder: holders[o.H], Principal: who, TTL: 30 * time.Second, Now: now})
	case OpRelease:
		s, err := r.current(ctx, sid)
		if err != nil {
			return nil, err
		}
		return nil, r.St.ReleaseLease(ctx, backend.LeaseRequest{Session: sid, Holder: holders[o.H], Epoch: s.Epoch, Now: now})
	case OpClaim:
		s, err := r.current(ctx, sid)
		if err != nil {
			return nil, err
		}
		id, ok := r.pick(ctx, sid, o.A, backend.StatusQueued)
		if !ok {
			return nil, errNothing
		}
		epoch := s.Epoch
		if o.Flag {
			epoch--
		}
		a, err := r.St.Claim(ctx, backend.ClaimRequest{Session: sid, AdmissionID: id, Epoch: epoch,
			Mode: []backend.Mode{backend.ModeTurn, backend.ModeNote}[o.N%2], DeliveredTo: s.CurrentTranscript, Now: now})
		return a, err
	case OpSettle, OpRequeue, OpSettleClaim:
		s, err := r.current(ctx, sid)
		if err != nil {
			return nil, err
		}
		var a backend.Admission
		if o.Kind == OpSettle && o.A >= 0 {
			if a, err = r.St.GetAdmission(ctx, r.ref(o.A)); err != nil {
				return nil, err
			}
		} else if x, ok := r.first(ctx, sid, backend.StatusRunning); ok {
			a = x
		} else {
			return nil, errNothing
		}
		req := backend.SettleRequest{Session: sid, AdmissionID: a.ID, Epoch: a.Epoch, Generation: a.Generation, Now: now}
		if o.Flag {
			req.Generation++
		}
		if o.Kind == OpRequeue {
			return r.St.Requeue(ctx, req)
		}
		req.Outcome = outcomes[o.N%len(outcomes)]
		to := a.DeliveredTo
		if to == "" {
			to = s.CurrentTranscript
		}
		req.Messages = []backend.NewMessage{{Transcript: to, Role: backend.RoleUser, Content: a.Text()},
			{Transcript: to, Role: backend.RoleAssistant, Content: "reply to " + a.Text(), Metadata: map[string]any{"n": 1}}}
		if o.Kind == OpSettle {
			return r.St.Settle(ctx, req)
		}
		next := backend.ClaimRequest{Session: sid, Epoch: s.Epoch, Mode: backend.ModeTurn, DeliveredTo: s.CurrentTranscript, Now: now}
		if o.A >= 0 {
			next.AdmissionID = r.ref(o.A)
		} else {
			// The head once the running one is settled: the first queued.
			h, ok := r.first(ctx, sid, backend.StatusQueued)
			if !ok {
				return nil, errNothing
			}
			next.AdmissionID = h.ID
		}
		res, err := r.St.SettleClaim(ctx, req, next)
		return map[string]any{"settled": res.Settled, "claimed": res.Claimed, "claim_err": ErrName(res.ClaimErr)}, err
	case OpSettleHead, OpSettleRun:
		s, err := r.current(ctx, sid)
		if err != nil {
			return nil, err
		}
		n := 1
		if o.Kind == OpSettleRun {
			n = o.N
		}
		as, err := r.St.ListAdmissions(ctx, sid, backend.AdmissionFilter{Statuses: []backend.Status{backend.StatusQueued}, Limit: n})
		if err != nil {
			return nil, err
		}
		if len(as) == 0 {
			return nil, errNothing
		}
		var reqs []backend.SettleRequest
		for _, a := range as {
			req := backend.SettleRequest{Session: sid, AdmissionID: a.ID, Epoch: s.Epoch, Direct: true, Unwatched: o.Flag,
				Outcome: backend.OutcomeCompleted, Mode: backend.ModeNote, DeliveredTo: s.CurrentTranscript, Now: now,
				Messages: []backend.NewMessage{{Transcript: s.CurrentTranscript, Role: backend.RoleNote, Content: a.Text()}}}
			if o.Kind == OpSettleHead {
				req.ExpectCurrent = o.X
				if o.N == 1 {
					req.Mode = backend.ModeTurn
					req.Messages = append(req.Messages, backend.NewMessage{Transcript: s.CurrentTranscript, Role: backend.RoleAssistant, Content: "ok"})
				}
				return r.St.Settle(ctx, req)
			}
			reqs = append(reqs, req)
		}
		return r.St.SettleRun(ctx, reqs)
	case OpResolve:
		id, ok := r.pick(ctx, sid, o.A, backend.StatusUnknown)
		if !ok {
			return nil, errNothing
		}
		return r.St.Resolve(ctx, id, resolutions[o.N%len(resolutions)], now)
	case OpCancel:
		id, ok := r.pick(ctx, sid, o.A, backend.StatusQueued)
		if !ok {
			return nil, errNothing
		}
		return r.St.Cancel(ctx, id, now)
	case OpViewer:
		v, err := r.St.AddViewer(ctx, sid, time.Duration(o.N)*time.Second, now)
		if err == nil {
			r.viewers = append(r.viewers, v.ID)
		}
		return v, err
	case OpUnview:
		if len(r.viewers) == 0 {
			return nil, errNothing
		}
		return nil, r.St.RemoveViewer(ctx, sid, r.viewers[o.V%len(r.viewers)])
	case OpClose:
		return r.St.CloseSession(ctx, sid, closeReason(o.N), now)
	case OpCompress:
		return r.St.Compress(ctx, sid, o.X, now)
	case OpSwitch:
		return r.St.Switch(ctx, sid, o.X, now)
	case OpCompact:
		before, err := r.cutoff(ctx, o.C)
		if err != nil {
			return nil, err
		}
		// Only Session, Before and Limit: the fields every version of the
		// request has.
		return r.St.Compact(ctx, backend.CompactRequest{Session: sid, Before: before, Limit: o.N})
	case OpSvcCompact:
		req := admission.CompactRequest{OlderThan: time.Duration(o.C.Off), Session: sid}
		if o.Flag {
			req.Session = ""
		}
		rep, err := r.Svc.Compact(ctx, req)
		// Sizes are each store's own.
		return map[string]any{"before": rep.Before, "sessions": rep.Sessions, "compacted": rep.Compacted}, err
	case OpReplay:
		if len(r.adm) == 0 {
			return nil, errNothing
		}
		res, err := r.Svc.Replay(ctx, admission.ReplayRequest{IDs: []string{r.ref(o.A)}, Again: o.Flag, Principal: principals[o.P]}, nil)
		var out []map[string]any
		for _, x := range res {
			r.see(x.Admission)
			out = append(out, map[string]any{"original": x.Original.ID, "result": x.Result, "admission": x.Admission, "err": ErrName(x.Err)})
		}
		return out, err
	case OpReimport:
		recs, err := exportRecords(ctx, r.St)
		if err != nil {
			return nil, err
		}
		return importRecords(ctx, r.St, recs)
	}
	return nil, fmt.Errorf("unknown op %q", o.Kind)
}

// cutoff resolves a compaction cutoff; "settled" is relative to the
// settle time of an admission (the clock when it has none).
func (r *Runner) cutoff(ctx context.Context, c Cutoff) (time.Time, error) {
	var settled time.Time
	if c.Name == "settled" && len(r.adm) > 0 {
		a, err := r.St.GetAdmission(ctx, r.ref(c.A))
		if err != nil {
			return time.Time{}, err
		}
		settled = a.SettledAt
	}
	return c.Time(r.Clock, settled), nil
}

// importRecords calls Store.Import, whatever it returns besides its error
// (an ImportResult, or nothing in older versions of the interface).
func importRecords(ctx context.Context, st backend.Store, recs []backend.Record) (any, error) {
	out := reflect.ValueOf(st).MethodByName("Import").Call([]reflect.Value{reflect.ValueOf(ctx), reflect.ValueOf(recs)})
	errV := out[len(out)-1]
	var err error
	if !errV.IsNil() {
		err = errV.Interface().(error)
	}
	if len(out) == 2 {
		return out[0].Interface(), err
	}
	return nil, err
}
