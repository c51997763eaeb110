package redis

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/hermesq/hermesq/pkg/backend"
)

// Admit commits the requests of each session with one admit script on the
// session's slot, so a call's requests to one session are committed all
// together or not at all. The global lookups they need (admission id →
// session, identity → sessions, the session index, the first transcript's
// id) are written first: if a script then refuses, they are orphans that
// every lookup verifies. Requests to several sessions are several scripts
// (on a Cluster, several slots), each tried: a session that fails (the
// store unavailable, its first transcript's id taken) gives its own
// requests that error, and the other sessions' results stand, committed.
// Only when the first session tried fails as unavailable and no other
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
}

// maxAdmitRounds bounds the rounds of Admit calls on their way at once: a
// round is two round trips (the lookups, the script). Two, so the server
// works on one round while the process reads the replies of the other and
// gathers the next: 8 callers admitting one input each went from about
// 11,500/s to 13,000-14,000/s (BenchmarkStore/AdmitParallel: 62 to 55 us
// per admit). More did no better on two cores.
const maxAdmitRounds = 2

type admitCall struct {
	reqs []backend.AdmitRequest
	out  []backend.AdmitResult
	err  error
	done chan struct{}
}

// leadAdmits sends the calls waiting as one round, then hands its lead on
// to a new goroutine if more arrived, so the caller that led returns.
func (s *Store) leadAdmits(ctx context.Context) {
	g := &s.admits
	g.mu.Lock()
	calls := g.pending
	g.pending = nil
	g.mu.Unlock()
	if len(calls) > 0 {
		s.admitCalls(ctx, calls)
	}
	g.mu.Lock()
	more := len(g.pending) > 0
	if !more {
		g.leading--
	}
	g.mu.Unlock()
	if more {
		go s.leadAdmits(ctx)
	}
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
	// Per call: the error of the first of its sessions tried, and whether
	// any of its sessions committed.
	tried := make([]bool, len(calls))
	firstErr := make([]error, len(calls))
	committed := make([]bool, len(calls))
	for _, sid := range order {
		idx := bySession[sid]
		group := make([]backend.AdmitRequest, len(idx))
		for j, x := range idx {
			group[j] = calls[x.call].reqs[x.req]
		}
		res, err := s.admitSession(ctx, sid, group)
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

// writeLookups writes the global lookups of admissions of session sid
// before the script that creates them: admission id → session (SET NX), and
// each identity → the sessions that may hold it. Idempotent; an entry whose
// script then refuses is an orphan that every lookup verifies, and that a
// later claim of the id takes over. It returns the ids another session
// holds (id → that session): those admissions must not be written.
func (s *Store) writeLookups(ctx context.Context, op, sid string, adms []backend.AdmitRequest) (map[string]string, error) {
	pipe := s.client.Pipeline()
	claims := make([]*goredis.BoolCmd, len(adms))
	value := sid + " " + nsOf(time.Now())
	for i, a := range adms {
		claims[i] = pipe.SetNX(ctx, s.k.admissionOwner(a.ID), value, 0)
		for _, id := range a.Identities {
			pipe.SAdd(ctx, s.k.identityOwners(id), sid)
		}
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, s.wrap(op, err)
	}
	var taken map[string]string
	for i, a := range adms {
		if claims[i].Val() {
			continue
		}
		holder, err := s.takeAdmissionID(ctx, op, sid, a.ID, value)
		if err != nil {
			return nil, err
		}
		if holder != "" {
			if taken == nil {
				taken = map[string]string{}
			}
			taken[a.ID] = holder
		}
	}
	return taken, nil
}

// takeAdmissionID makes session sid the owner of admission id's lookup
// (value: "<sid> <claimed at, ns>") when its present owner is an orphan: a
// session holding no such admission whose claim is older than orphanAge
// (a younger one may belong to a script still on its way). The take-over
// is a compare-and-set, so two sessions taking one orphan over at once
// cannot both win. It returns the session that holds the id, "" when sid
// may use it.
func (s *Store) takeAdmissionID(ctx context.Context, op, sid, id, value string) (string, error) {
	key := s.k.admissionOwner(id)
	for attempt := 0; attempt < maxSwaps; attempt++ {
		raw, err := s.client.Get(ctx, key).Result()
		if err != nil && err != goredis.Nil {
			return "", s.wrap(op, err)
		}
		owner, claimedAt := parseClaim(raw)
		if owner == sid {
			return "", nil
		}
		if owner != "" {
			held, err := s.client.HExists(ctx, s.k.admissions(owner), id).Result()
			if err != nil {
				return "", s.wrap(op, err)
			}
			if held || time.Since(claimedAt) < orphanAge {
				return owner, nil
			}
		}
		swapped, err := s.swapLookup(ctx, op, key, raw, value)
		if err != nil {
			return "", err
		}
		if swapped {
			return "", nil
		}
	}
	return "", backend.Errorf(backend.ErrConflict, "redis: %s: admission id %s is being taken by other sessions", op, id)
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
	flag := func(b bool) string {
		if b {
			return "1"
		}
		return "0"
	}
	args := []any{s.k.changes(), sid}
	for _, i := range run {
		req := reqs[i]
		args = append(args, req.ID, string(req.Kind), req.Producer, req.Principal,
			req.RequestID, string(req.Payload), req.PinnedTarget, req.ReplayOf,
			flag(req.CreateSession), flag(req.Reopen), nsOf(nowOr(req.Now)), len(req.Identities))
		for _, id := range req.Identities {
			args = append(args, id)
		}
		args = append(args, len(req.Parts))
		for _, p := range req.Parts {
			args = append(args, string(backend.PartMember(p)), string(backend.PartTextFragment(p.Payload)), string(p.Payload))
		}
	}
	r, err := s.eval(ctx, scriptAdmit, []string{
		s.k.session(sid), s.k.grants(sid), s.k.transcripts(sid), s.k.admissions(sid),
		s.k.payloads(sid), s.k.identityLists(sid), s.k.seqs(sid), s.k.queued(sid),
		s.k.identities(sid), s.k.requests(sid),
	}, args...)
	if err != nil {
		return nil, s.wrap(op, err)
	}
	if len(r) != len(run) {
		return nil, errInternalf("%s: %d replies for %d requests", op, len(r), len(run))
	}
	for j, i := range run {
		one, _ := r[j].([]any)
		if len(one) == 0 {
			return nil, errInternalf("%s: bad reply %v", op, r[j])
		}
		res, err := s.admitResult(reqs[i], one)
		if err != nil {
			if backend.CodeOf(err) == backend.CodeInternal {
				return nil, err
			}
			res = backend.AdmitResult{Err: err}
		}
		out[i] = res
	}
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

func (s *Store) admitResult(req backend.AdmitRequest, r []any) (backend.AdmitResult, error) {
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
	a, err := decodeAdmission(str(r[2]), str(r[3]), str(r[4]))
	if err != nil {
		return backend.AdmitResult{}, err
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

// readAdmissions reads admissions of one session by id, in the given order;
// ids without a record are skipped.
func (s *Store) readAdmissions(ctx context.Context, session string, ids []string) ([]backend.Admission, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	var recs, payloads, idents []any
	err := s.readRetry(ctx, "read admissions of "+session, func() error {
		pipe := s.client.Pipeline()
		c1 := pipe.HMGet(ctx, s.k.admissions(session), ids...)
		c2 := pipe.HMGet(ctx, s.k.payloads(session), ids...)
		c3 := pipe.HMGet(ctx, s.k.identityLists(session), ids...)
		if _, err := pipe.Exec(ctx); err != nil {
			return err
		}
		recs, payloads, idents = c1.Val(), c2.Val(), c3.Val()
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := make([]backend.Admission, 0, len(ids))
	for i := range ids {
		rec, _ := recs[i].(string)
		if rec == "" {
			continue
		}
		p, _ := payloads[i].(string)
		id, _ := idents[i].(string)
		a, err := decodeAdmission(rec, p, id)
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, nil
}

// GetAdmission returns one admission by id.
func (s *Store) GetAdmission(ctx context.Context, id string) (backend.Admission, error) {
	session, err := s.admissionSession(ctx, id)
	if err != nil {
		return backend.Admission{}, err
	}
	as, err := s.readAdmissions(ctx, session, []string{id})
	if err != nil {
		return backend.Admission{}, err
	}
	if len(as) == 0 {
		return backend.Admission{}, backend.Errorf(backend.ErrNotFound, "redis: admission %s", id)
	}
	return as[0], nil
}

// admissionSession looks the admission's session up (not verified: the
// caller reads the admission in that session).
func (s *Store) admissionSession(ctx context.Context, id string) (string, error) {
	var session string
	err := s.readRetry(ctx, "get admission "+id, func() error {
		var err error
		raw, err := s.client.Get(ctx, s.k.admissionOwner(id)).Result()
		if err == goredis.Nil {
			return backend.Errorf(backend.ErrNotFound, "redis: admission %s", id)
		}
		session, _ = parseClaim(raw) // "<session> <claimed at>", or a bare session
		return err
	})
	return session, err
}

const pageSize = 512

// ListAdmissions returns a session's admissions in seq order, filtered;
// tombstones are left out.
func (s *Store) ListAdmissions(ctx context.Context, session string, f backend.AdmissionFilter) ([]backend.Admission, error) {
	return s.listAdmissions(ctx, session, f, false)
}

// listAdmissions is ListAdmissions, with tombstones when tombstones is set
// (Export).
func (s *Store) listAdmissions(ctx context.Context, session string, f backend.AdmissionFilter, tombstones bool) ([]backend.Admission, error) {
	var exists int64
	err := s.readRetry(ctx, "list admissions of "+session, func() error {
		var err error
		exists, err = s.client.Exists(ctx, s.k.session(session)).Result()
		return err
	})
	if err != nil {
		return nil, err
	}
	if exists == 0 {
		return nil, backend.Errorf(backend.ErrNotFound, "redis: session %s", session)
	}
	index := s.k.seqs(session)
	if len(f.Statuses) == 1 && f.Statuses[0] == backend.StatusQueued {
		index = s.k.queued(session) // the FIFO itself: the head is one read away
	}
	statuses := map[backend.Status]bool{}
	for _, st := range f.Statuses {
		statuses[st] = true
	}
	outcomes := map[backend.Outcome]bool{}
	for _, o := range f.Outcomes {
		outcomes[o] = true
	}
	var out []backend.Admission
	min := "(" + itoa(int64(f.AfterSeq))
	count := int64(pageSize)
	if f.Limit > 0 && f.Limit < pageSize && len(outcomes) == 0 &&
		(len(statuses) == 0 || index == s.k.queued(session)) {
		count = int64(f.Limit) // every id read is a match
	}
	for {
		var zs []goredis.Z
		err := s.readRetry(ctx, "list admissions of "+session, func() error {
			var err error
			zs, err = s.client.ZRangeByScoreWithScores(ctx, index, &goredis.ZRangeBy{
				Min: min, Max: "+inf", Count: count}).Result()
			return err
		})
		if err != nil {
			return nil, err
		}
		ids := make([]string, len(zs))
		for i, z := range zs {
			ids[i], _ = z.Member.(string)
		}
		as, err := s.readAdmissions(ctx, session, ids)
		if err != nil {
			return nil, err
		}
		for _, a := range as {
			if a.Compacted && !tombstones {
				continue
			}
			if len(statuses) > 0 && !statuses[a.Status] {
				continue
			}
			if len(outcomes) > 0 && !outcomes[a.Outcome] {
				continue
			}
			out = append(out, a)
			if f.Limit > 0 && len(out) >= f.Limit {
				return out, nil
			}
		}
		if int64(len(zs)) < count {
			return out, nil
		}
		min = "(" + itoa(int64(zs[len(zs)-1].Score))
	}
}

// FindIdentity returns the admission of the session (or of any session)
// holding identity.
func (s *Store) FindIdentity(ctx context.Context, session, identity string) (backend.Admission, error) {
	sessions := []string{session}
	if session == "" {
		err := s.readRetry(ctx, "find identity", func() error {
			var err error
			sessions, err = s.client.SMembers(ctx, s.k.identityOwners(identity)).Result()
			return err
		})
		if err != nil {
			return backend.Admission{}, err
		}
		sort.Strings(sessions)
	}
	for _, sess := range sessions {
		var id string
		err := s.readRetry(ctx, "find identity", func() error {
			var err error
			id, err = s.client.HGet(ctx, s.k.identities(sess), identity).Result()
			if err == goredis.Nil {
				id, err = "", nil
			}
			return err
		})
		if err != nil {
			return backend.Admission{}, err
		}
		if id == "" {
			continue
		}
		as, err := s.readAdmissions(ctx, sess, []string{id})
		if err != nil {
			return backend.Admission{}, err
		}
		if len(as) == 1 {
			return as[0], nil
		}
	}
	return backend.Admission{}, backend.Errorf(backend.ErrNotFound, "redis: identity %q", identity)
}

// Claim moves the session's FIFO head to running.
func (s *Store) Claim(ctx context.Context, req backend.ClaimRequest) (backend.Admission, error) {
	keys, args := s.claimCall(req)
	r, err := s.eval(ctx, scriptClaim, keys, args...)
	return s.admissionReply(r, err, "claim", req.AdmissionID, req.Session)
}

// claimCall is the keys and arguments of claim.lua for req.
func (s *Store) claimCall(req backend.ClaimRequest) ([]string, []any) {
	sid := req.Session
	return []string{
			s.k.session(sid), s.k.admissions(sid), s.k.queued(sid), s.k.running(sid), s.k.unknown(sid),
			s.k.payloads(sid), s.k.identityLists(sid), s.k.grants(sid),
		}, []any{s.k.changes(), sid, req.AdmissionID, req.Epoch, string(req.Mode), req.DeliveredTo,
			nsOf(nowOr(req.Now))}
}

// admissionReply decodes {'ok', record, payload, identity list} replies.
func (s *Store) admissionReply(r []any, err error, op, id, session string) (backend.Admission, error) {
	if err != nil {
		return backend.Admission{}, s.wrap(op+" "+id, err)
	}
	if err := s.scriptErr(r, op, "admission "+id+" of session "+session); err != nil {
		return backend.Admission{}, err
	}
	if len(r) < 4 {
		return backend.Admission{}, errInternalf("%s %s: short reply", op, id)
	}
	return decodeAdmission(str(r[1]), str(r[2]), str(r[3]))
}

// Settle ends an admission and appends its messages in one script.
func (s *Store) Settle(ctx context.Context, req backend.SettleRequest) (backend.Admission, error) {
	if err := backend.CheckSettleRequest(req); err != nil {
		return backend.Admission{}, fmt.Errorf("redis: settle %s: %w", req.AdmissionID, err)
	}
	if req.Unwatched {
		// The viewer check lives in the run script: a run of one.
		out, err := s.SettleRun(ctx, []backend.SettleRequest{req})
		if err != nil {
			return backend.Admission{}, err
		}
		return out[0], nil
	}
	keys, args, err := s.settleCall(req)
	if err != nil {
		return backend.Admission{}, err
	}
	r, err := s.eval(ctx, scriptSettle, keys, args...)
	return s.admissionReply(r, err, "settle", req.AdmissionID, req.Session)
}

// settleCall is the keys and arguments of settle.lua for req.
func (s *Store) settleCall(req backend.SettleRequest) (keys []string, args []any, err error) {
	sid := req.Session
	now := nowOr(req.Now)
	keys = []string{s.k.session(sid), s.k.admissions(sid), s.k.queued(sid), s.k.running(sid),
		s.k.unknown(sid), s.k.transcripts(sid), s.k.payloads(sid), s.k.identityLists(sid), s.k.grants(sid)}
	args = []any{s.k.changes(), sid, req.AdmissionID, req.Epoch, req.Generation,
		map[bool]string{true: "1", false: "0"}[req.Direct], string(req.Outcome), string(req.Mode),
		req.DeliveredTo, req.Error, nsOf(now), req.ExpectCurrent}
	for _, m := range req.Messages {
		raw, err := encodeMessage(m.Role, m.Content, req.AdmissionID, now, m.Metadata)
		if err != nil {
			return nil, nil, err
		}
		keys = append(keys, s.k.messages(sid, m.Transcript))
		args = append(args, m.Transcript, string(m.Role), raw)
	}
	return keys, args, nil
}

// SettleClaim settles req and claims next in one script (settle_claim.lua:
// settle.lua's body, then claim.lua's).
func (s *Store) SettleClaim(ctx context.Context, req backend.SettleRequest, next backend.ClaimRequest) (backend.SettleClaimResult, error) {
	var out backend.SettleClaimResult
	if err := backend.CheckSettleClaimRequest(req, next); err != nil {
		return out, fmt.Errorf("redis: %w", err)
	}
	skeys, sargs, err := s.settleCall(req)
	if err != nil {
		return out, err
	}
	ckeys, cargs := s.claimCall(next)
	keys := append(skeys, ckeys...)
	args := append([]any{len(skeys), len(sargs)}, sargs...)
	args = append(args, cargs...)
	r, err := s.eval(ctx, scriptSettleClaim, keys, args...)
	if out.Settled, err = s.admissionReply(r, err, "settle", req.AdmissionID, req.Session); err != nil {
		return backend.SettleClaimResult{}, err
	}
	if len(r) < 5 {
		return backend.SettleClaimResult{}, errInternalf("settle %s and claim %s: short reply", req.AdmissionID, next.AdmissionID)
	}
	out.Claimed, out.ClaimErr = s.admissionReply(r[4:], nil, "claim", next.AdmissionID, next.Session)
	return out, nil
}

// SettleRun settles a run of queued heads with one script on the session's
// slot, stopping at the first that fails.
func (s *Store) SettleRun(ctx context.Context, reqs []backend.SettleRequest) ([]backend.Admission, error) {
	if len(reqs) == 0 {
		return []backend.Admission{}, nil
	}
	sid := reqs[0].Session
	keys := []string{s.k.session(sid), s.k.admissions(sid), s.k.queued(sid), s.k.running(sid),
		s.k.unknown(sid), s.k.transcripts(sid), s.k.payloads(sid), s.k.identityLists(sid), s.k.viewers(sid),
		s.k.grants(sid)}
	listAt := map[string]int{} // transcript → its messages list's index in KEYS (1-based)
	args := make([]any, 0, 4+len(reqs)*14)
	args = append(args, s.k.changes(), sid, strconv.FormatInt(time.Now().UnixMilli(), 10), len(reqs))
	for _, req := range reqs {
		if err := backend.CheckSettleRequest(req); err != nil {
			return nil, fmt.Errorf("redis: settle run: admission %s: %w", req.AdmissionID, err)
		}
		if !req.Direct {
			return nil, backend.Errorf(backend.ErrInvalid, "redis: settle run: admission %s: a run settles queued heads only (direct)", req.AdmissionID)
		}
		if req.Session != sid {
			return nil, backend.Errorf(backend.ErrInvalid, "redis: settle run: admission %s: session %s in a run of session %s", req.AdmissionID, req.Session, sid)
		}
		now := nowOr(req.Now)
		args = append(args, req.AdmissionID, req.Epoch, string(req.Outcome), string(req.Mode), req.DeliveredTo,
			req.Error, nsOf(now), map[bool]string{true: "1", false: "0"}[req.Unwatched], req.ExpectCurrent, len(req.Messages))
		for _, m := range req.Messages {
			raw, err := encodeMessage(m.Role, m.Content, req.AdmissionID, now, m.Metadata)
			if err != nil {
				return nil, err
			}
			at, ok := listAt[m.Transcript]
			if !ok {
				keys = append(keys, s.k.messages(sid, m.Transcript))
				at = len(keys)
				listAt[m.Transcript] = at
			}
			args = append(args, at, m.Transcript, string(m.Role), raw)
		}
	}
	r, err := s.eval(ctx, scriptSettleRun, keys, args...)
	if err != nil {
		return nil, s.wrap("settle run of session "+sid, err)
	}
	if len(r) < 2 || (len(r)-2)%3 != 0 {
		return nil, errInternalf("settle run of session %s: reply of %d elements", sid, len(r))
	}
	out := make([]backend.Admission, 0, (len(r)-2)/3)
	for j := 2; j < len(r); j += 3 {
		a, err := decodeAdmission(str(r[j]), str(r[j+1]), str(r[j+2]))
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	if err := s.scriptErr(r, "settle", "admission "+str(r[1])+" of session "+sid); err != nil {
		if status(r) == "no_transcript" && len(out) < len(reqs) {
			err = backend.Errorf(backend.ErrNotFound, "redis: settle admission %s of session %s: transcript %s",
				reqs[len(out)].AdmissionID, sid, str(r[1]))
		}
		return out, err
	}
	return out, nil
}

// Requeue puts a running admission back to queued.
func (s *Store) Requeue(ctx context.Context, req backend.SettleRequest) (backend.Admission, error) {
	sid := req.Session
	r, err := s.eval(ctx, scriptRequeue, []string{
		s.k.session(sid), s.k.admissions(sid), s.k.queued(sid), s.k.running(sid),
		s.k.payloads(sid), s.k.identityLists(sid),
	}, s.k.changes(), sid, req.AdmissionID, req.Epoch, req.Generation)
	return s.admissionReply(r, err, "requeue", req.AdmissionID, sid)
}

// Resolve settles an unknown admission or requeues it.
func (s *Store) Resolve(ctx context.Context, id string, as backend.Resolution, now time.Time) (backend.Admission, error) {
	switch as {
	case backend.ResolveCompleted, backend.ResolveInterrupted, backend.ResolveRequeue:
	default:
		return backend.Admission{}, backend.Errorf(backend.ErrInvalid, "redis: resolve %s as %q", id, as)
	}
	sid, err := s.admissionSession(ctx, id)
	if err != nil {
		return backend.Admission{}, err
	}
	r, err := s.eval(ctx, scriptResolve, []string{s.k.admissions(sid), s.k.queued(sid), s.k.unknown(sid),
		s.k.payloads(sid), s.k.identityLists(sid)},
		s.k.changes(), sid, id, string(as), nsOf(nowOr(now)))
	return s.admissionReply(r, err, "resolve", id, sid)
}

// Cancel settles a queued admission as cancelled.
func (s *Store) Cancel(ctx context.Context, id string, now time.Time) (backend.Admission, error) {
	sid, err := s.admissionSession(ctx, id)
	if err != nil {
		return backend.Admission{}, err
	}
	r, err := s.eval(ctx, scriptCancel, []string{s.k.admissions(sid), s.k.queued(sid),
		s.k.payloads(sid), s.k.identityLists(sid)},
		s.k.changes(), sid, id, nsOf(nowOr(now)))
	return s.admissionReply(r, err, "cancel", id, sid)
}
