package redis

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hermesq/hermesq/pkg/backend"
)

// Admit commits the requests of each session with one admit script on the
// session's slot, so a call's requests to one session are committed all
// together or not at all. The global lookups they need (admission id →
// session, identity → sessions, the session index, the first transcript's
// id) are written first: if a script then refuses, they are orphans that
// every lookup verifies. On one server (standalone or Sentinel), where
// every key can be reached from one script, the admit script writes those
// lookups itself first, one round trip instead of two; it falls back to
// the two steps when a session must be created or an id's lookup is held
// by another session. Requests to several sessions are several scripts
// (on a Cluster, several slots), up to maxSessionsInFlight of them on
// their way at once, each tried: a session that fails (the store
// unavailable, its first transcript's id taken) gives its own requests
// that error, and the other sessions' results stand, committed. Only when
// the first session the call names fails as unavailable and no other
// commits is the failure the call's (nothing admitted).
//
// Concurrent calls of the process are pipelined: while one round is on its
// way, the calls arriving wait and then go together, each session's
// requests of all of them in one script (in arrival order), so concurrent
// callers share round trips. Each call's results are judged as above on
// the sessions it wrote to.
func (s *Store) Admit(ctx context.Context, reqs []backend.AdmitRequest) ([]backend.AdmitResult, error) {
	c := &admitCall{reqs: reqs, done: make(chan struct{})}
	g := &s.admits
	g.mu.Lock()
	g.pending = append(g.pending, c)
	lead := g.leading < maxAdmitRounds
	if lead {
		g.leading++
	}
	g.mu.Unlock()
	if lead {
		s.leadAdmits(context.WithoutCancel(ctx))
	}
	<-c.done
	return c.out, c.err
}

// admitGroup is the queue of concurrent Admit calls.
type admitGroup struct {
	mu      sync.Mutex
	pending []*admitCall
	leading int // rounds on their way
	// relay hands the lead of the next round to an idle relay goroutine
	// (unbuffered: a send succeeds only when one is waiting for it).
	relay chan struct{}
}

// maxAdmitRounds bounds the rounds of Admit calls on their way at once: a
// round is two round trips (the lookups, the script). Two, so the server
// works on one round while the process reads the replies of the other and
// gathers the next: 8 callers admitting one input each went from about
// 11,500/s to 13,000-14,000/s (BenchmarkStore/AdmitParallel: 62 to 55 us
// per admit). More did no better on two cores.
const maxAdmitRounds = 2

// maxSessionsInFlight bounds the sessions of one round whose scripts are
// on their way at once (admitCalls).
const maxSessionsInFlight = 8

// relayIdle is how long a relay goroutine waits for another round to lead
// before it ends.
const relayIdle = time.Second

type admitCall struct {
	reqs []backend.AdmitRequest
	out  []backend.AdmitResult
	err  error
	done chan struct{}
}

// leadAdmits sends the calls waiting as one round, in the goroutine of the
// caller that leads it. If more calls arrived meanwhile, it hands the lead
// on, so that caller returns: to a relay goroutine waiting for one, else
// to a new one. Relays live on for relayIdle after their last round, so a
// steady stream of concurrent calls is led by the same few goroutines,
// whose stacks have grown to what a round needs (a goroutine started for
// each round grew its stack on every round: a tenth of the process's CPU
// with 8 callers).
func (s *Store) leadAdmits(ctx context.Context) {
	if !s.admitRound(ctx) {
		return
	}
	select {
	case s.admits.relay <- struct{}{}:
	default:
		go s.relayAdmits(ctx)
	}
}

// relayAdmits leads rounds while calls are waiting, then waits up to
// relayIdle to be handed the lead again.
func (s *Store) relayAdmits(ctx context.Context) {
	var idle *time.Timer
	for {
		for s.admitRound(ctx) {
		}
		if idle == nil {
			idle = time.NewTimer(relayIdle)
		} else {
			idle.Reset(relayIdle)
		}
		select {
		case <-s.admits.relay:
		case <-idle.C:
			return
		}
	}
}

// admitRound sends the calls waiting as one round. It reports whether
// more calls are waiting, in which case the caller keeps the round's slot
// and must lead the next; otherwise the slot is given back.
func (s *Store) admitRound(ctx context.Context) bool {
	g := &s.admits
	g.mu.Lock()
	calls := g.pending
	g.pending = nil
	g.mu.Unlock()
	if len(calls) > 0 {
		s.admitCalls(ctx, calls)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.pending) > 0 {
		return true
	}
	g.leading--
	return false
}

// admitCalls commits the requests of calls, one script per session.
func (s *Store) admitCalls(ctx context.Context, calls []*admitCall) {
	type at struct{ call, req int }
	var order []string
	bySession := map[string][]at{}
	for ci, c := range calls {
		c.out = make([]backend.AdmitResult, len(c.reqs))
		for i := range c.reqs {
			req := &c.reqs[i]
			if err := s.checkAdmit(req); err != nil {
				c.out[i] = backend.AdmitResult{Err: err}
				continue
			}
			if _, ok := bySession[req.Session]; !ok {
				order = append(order, req.Session)
			}
			bySession[req.Session] = append(bySession[req.Session], at{ci, i})
		}
	}
	// Each session's script is on its way while the others' are: sessions
	// are independent (every key a script writes is its session's, or a
	// lookup that verifies itself), so any order of them is an order the
	// sequential calls could have taken. At most maxSessionsInFlight at
	// once, each on its own connection of the pool.
	type sessionOut struct {
		res []backend.AdmitResult
		err error
	}
	outs := make([]sessionOut, len(order))
	admit := func(k int) {
		sid := order[k]
		idx := bySession[sid]
		group := make([]backend.AdmitRequest, len(idx))
		for j, x := range idx {
			group[j] = calls[x.call].reqs[x.req]
		}
		outs[k].res, outs[k].err = s.admitSession(ctx, sid, group)
	}
	if len(order) == 1 {
		admit(0)
	} else {
		var wg sync.WaitGroup
		next := make(chan int)
		for range min(len(order), maxSessionsInFlight) {
			wg.Go(func() {
				for k := range next {
					admit(k)
				}
			})
		}
		for k := range order {
			next <- k
		}
		close(next)
		wg.Wait()
	}
	// Per call: the error of the first of its sessions tried (in the order
	// its requests name them), and whether any of its sessions committed.
	tried := make([]bool, len(calls))
	firstErr := make([]error, len(calls))
	committed := make([]bool, len(calls))
	for k, sid := range order {
		idx := bySession[sid]
		res, err := outs[k].res, outs[k].err
		for j, x := range idx {
			c := calls[x.call]
			if !tried[x.call] {
				tried[x.call], firstErr[x.call] = true, err
			}
			if err != nil {
				c.out[x.req] = backend.AdmitResult{Err: err}
				continue
			}
			committed[x.call] = true
			c.out[x.req] = res[j]
		}
	}
	for ci, c := range calls {
		if err := firstErr[ci]; err != nil && !committed[ci] && backend.CodeOf(err) == backend.CodeUnavailable {
			c.out, c.err = nil, err
		}
		close(c.done)
	}
}

func (s *Store) checkAdmit(req *backend.AdmitRequest) error {
	if err := backend.CheckAdmitRequest(*req); err != nil {
		return fmt.Errorf("redis: admit to session %s: %w", req.Session, err)
	}
	return nil
}

// admitSession commits requests to one session in one script.
func (s *Store) admitSession(ctx context.Context, sid string, reqs []backend.AdmitRequest) ([]backend.AdmitResult, error) {
	op := "admit to session " + sid
	create := false
	for i := range reqs {
		if reqs[i].ID == "" {
			reqs[i].ID = backend.NewAdmissionID(reqs[i].Now)
		}
		create = create || (reqs[i].Kind == backend.KindHuman && reqs[i].CreateSession)
	}
	if !create && s.oneServer {
		// Every key is on this server: one script writes the lookups and
		// admits, unless an id's lookup is another session's (then the two
		// steps below judge it).
		all := make([]int, len(reqs))
		for i := range all {
			all[i] = i
		}
		out := make([]backend.AdmitResult, len(reqs))
		err := s.runAdmit(ctx, op, sid, reqs, all, sid+" "+nsOf(time.Now()), out)
		if err == nil {
			return s.judgeParts(ctx, sid, reqs, all, out)
		}
		if !errors.Is(err, errLookupHeld) {
			return nil, err
		}
	}
	out := make([]backend.AdmitResult, len(reqs))
	taken, err := s.writeLookups(ctx, op, sid, reqs)
	if err != nil {
		return nil, err
	}
	var run []int // the requests the script commits
	for i, req := range reqs {
		if holder, ok := taken[req.ID]; ok {
			out[i].Err = backend.Errorf(backend.ErrConflict, "redis: admit to session %s: admission id %s is taken by session %s", sid, req.ID, holder)
			continue
		}
		run = append(run, i)
	}
	if len(run) == 0 {
		return out, nil
	}
	if create {
		n, err := s.client.Exists(ctx, s.k.session(sid)).Result()
		if err != nil {
			return nil, s.wrap(op, err)
		}
		if n == 0 {
			if _, err := s.claimTranscript(ctx, sid, sid); err != nil {
				if !errors.Is(err, backend.ErrConflict) {
					return nil, err
				}
				// The session cannot be created (its first transcript's id
				// is another's): the requests that would create it are
				// refused with that conflict, the others find no session,
				// each its own result as bbolt gives them.
				for _, i := range run {
					if reqs[i].Kind == backend.KindHuman && reqs[i].CreateSession {
						out[i].Err = err
					} else {
						out[i].Err = backend.Errorf(backend.ErrNotFound, "redis: admit to session %s: no such session", sid)
					}
				}
				return out, nil
			}
			if err := s.indexSession(ctx, sid); err != nil {
				return nil, err
			}
		}
	}
	if err := s.runAdmit(ctx, op, sid, reqs, run, "", out); err != nil {
		return nil, err
	}
	return s.judgeParts(ctx, sid, reqs, run, out)
}

// errLookupHeld is admit.lua's refusal, given a claim, when an admission
// id's lookup is held by another session.
var errLookupHeld = errors.New("admission id lookup held by another session")

// runAdmit runs admit.lua on the requests run of reqs to session sid and
// puts their results in out. With a claim ("<sid> <ns>"), the script
// first writes the global lookups itself (every key on one server); it
// fails with errLookupHeld, nothing admitted, when one is held by another
// session.
func (s *Store) runAdmit(ctx context.Context, op, sid string, reqs []backend.AdmitRequest, run []int, claim string, out []backend.AdmitResult) error {
	flag := func(b bool) string {
		if b {
			return "1"
		}
		return "0"
	}
	keys := []string{
		s.k.session(sid), s.k.grants(sid), s.k.transcripts(sid), s.k.admissions(sid),
		s.k.payloads(sid), s.k.identityLists(sid), s.k.seqs(sid), s.k.queued(sid),
		s.k.identities(sid), s.k.requests(sid),
	}
	args := []any{s.k.changes(), sid, claim}
	nows := make([]string, len(run))
	for j, i := range run {
		req := reqs[i]
		nows[j] = nsOf(nowOr(req.Now))
		if claim != "" {
			keys = append(keys, s.k.admissionOwner(req.ID))
			for _, id := range req.Identities {
				keys = append(keys, s.k.identityOwners(id))
			}
		}
		args = append(args, req.ID, string(req.Kind), req.Producer, req.Principal,
			req.RequestID, string(req.Payload), req.PinnedTarget, req.ReplayOf,
			flag(req.CreateSession), flag(req.Reopen), nows[j], len(req.Identities))
		for _, id := range req.Identities {
			args = append(args, id)
		}
		args = append(args, len(req.Parts))
		for _, p := range req.Parts {
			args = append(args, string(backend.PartMember(p)), string(backend.PartTextFragment(p.Payload)), string(p.Payload))
		}
	}
	r, err := s.eval(ctx, scriptAdmit, keys, args...)
	if err != nil {
		return s.wrap(op, err)
	}
	if claim != "" && len(r) == 1 && str(r[0]) == "held" {
		return errLookupHeld
	}
	if len(r) != len(run) {
		return errInternalf("%s: %d replies for %d requests", op, len(r), len(run))
	}
	for j, i := range run {
		one, _ := r[j].([]any)
		if len(one) == 0 {
			return errInternalf("%s: bad reply %v", op, r[j])
		}
		res, err := s.admitResult(reqs[i], nows[j], one)
		if err != nil {
			if backend.CodeOf(err) == backend.CodeInternal {
				return err
			}
			res = backend.AdmitResult{Err: err}
		}
		out[i] = res
	}
	return nil
}

// judgeParts sets payload_differs of the committed offers with parts
// among run (partsDiffer).
func (s *Store) judgeParts(ctx context.Context, sid string, reqs []backend.AdmitRequest, run []int, out []backend.AdmitResult) ([]backend.AdmitResult, error) {
	for _, i := range run {
		if len(reqs[i].Parts) > 0 && len(out[i].Duplicates) > 0 && out[i].Err == nil {
			differs, err := s.partsDiffer(ctx, sid, reqs[i], out[i])
			if err != nil {
				return nil, err
			}
			out[i].PayloadDiffers = differs
		}
	}
	return out, nil
}

// partsDiffer judges payload_differs per member for an offer with parts:
// each held identity's part against the part it committed. Committed
// payloads never change, so reading them after the script is exact.
func (s *Store) partsDiffer(ctx context.Context, sid string, req backend.AdmitRequest, res backend.AdmitResult) (bool, error) {
	held, err := s.readAdmissions(ctx, sid, res.Duplicates)
	if err != nil {
		return false, err
	}
	for i, ident := range req.Identities {
		if res.Identities[ident] != backend.ResultDuplicate {
			continue
		}
		for _, a := range held {
			if slices.Contains(a.Identities, ident) && backend.PartDiffers(req.Parts[i].Payload, a, ident) {
				return true, nil
			}
		}
	}
	return false, nil
}

// admitResult reads one request's reply of admit.lua; now is the time
// (ns) the request was sent with.
func (s *Store) admitResult(req backend.AdmitRequest, now string, r []any) (backend.AdmitResult, error) {
	sid := req.Session
	detail := ""
	if len(r) > 1 {
		detail = str(r[1])
	}
	switch status(r) {
	case "conflict":
		return backend.AdmitResult{}, backend.Errorf(backend.ErrConflict,
			"redis: admit to session %s: request id %q was used with another payload by admission %s", sid, req.RequestID, detail)
	case "id_taken":
		return backend.AdmitResult{}, backend.Errorf(backend.ErrConflict,
			"redis: admit to session %s: admission id %s is taken by another request", sid, detail)
	case "closed":
		return backend.AdmitResult{}, backend.Errorf(backend.ErrClosed,
			"redis: admit to session %s: its current transcript %s is closed (reopen it to admit)", sid, detail)
	case "forbidden":
		return backend.AdmitResult{}, fmt.Errorf("redis: %w", backend.Forbidden(sid, req.Principal, backend.AdmitAction(req.Kind), req.Producer))
	case "not_found":
		return backend.AdmitResult{}, backend.Errorf(backend.ErrNotFound, "redis: admit to session %s: no such session", sid)
	case "ok":
	default:
		return backend.AdmitResult{}, errInternalf("admit to session %s: unknown script status %q", sid, status(r))
	}
	if len(r) < 8 {
		return backend.AdmitResult{}, errInternalf("admit to session %s: short reply", sid)
	}
	var a backend.Admission
	if rec := str(r[2]); rec != "" {
		var err error
		if a, err = decodeAdmission(rec, str(r[3]), str(r[4])); err != nil {
			return backend.AdmitResult{}, err
		}
	} else {
		// A new admission: its record is what the request gave, with the
		// seq and pinned target the script chose.
		if len(r) < 10 {
			return backend.AdmitResult{}, errInternalf("admit to session %s: short reply", sid)
		}
		seq, ok := r[8].(int64)
		if !ok || seq < 1 {
			return backend.AdmitResult{}, errInternalf("admit to session %s: bad seq %v", sid, r[8])
		}
		payload := []byte(str(r[3]))
		if len(payload) == 0 {
			payload = slices.Clone(req.Payload)
		}
		a = newAdmission(req, uint64(seq), str(r[9]), now, payload, str(r[4]))
	}
	res := backend.AdmitResult{Result: str(r[1]), Admission: a, PayloadDiffers: str(r[5]) == "1"}
	if d := str(r[6]); d != "" {
		res.Duplicates = strings.Split(d, "\x00")
	}
	res.Identities = map[string]string{}
	idres := str(r[7])
	for i, id := range req.Identities {
		if i < len(idres) && idres[i] == 'd' {
			res.Identities[id] = backend.ResultDuplicate
		} else {
			res.Identities[id] = backend.ResultAdmitted
		}
	}
	return res, nil
}
