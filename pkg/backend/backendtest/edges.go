package backendtest

import (
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/hermesq/hermesq/pkg/backend"
)

// edgeTests pin down what the stores once answered differently where the
// contract's words decide (store.go, errors.go): every store answers alike.
var edgeTests = []suiteTest{
	{name: "Edges/InvalidOwnerAndPrincipal", fn: testInvalidOwnerAndPrincipal},
	{name: "Edges/CloseReasonInvalid", fn: testCloseReasonInvalid},
	{name: "Edges/CompressClosed", fn: testCompressClosed},
	{name: "Edges/RemoveViewerUnknown", fn: testRemoveViewerUnknown},
	{name: "Edges/DefaultTTLs", fn: testDefaultTTLs},
	{name: "Edges/ConflictNamesRequestAndAdmission", fn: testConflictMessage},
	{name: "Edges/ExportGrantsNeverNull", fn: testExportGrantsNeverNull},
	{name: "Edges/AdmitMalformed", fn: testAdmitMalformed},
	{name: "Edges/ImportOutOfOrder", fn: testImportOutOfOrder},
	{name: "Edges/SettleMalformed", fn: testSettleMalformed},
	{name: "Edges/GrantsAreASet", fn: testGrantsAreASet},
	{name: "Edges/ImportKeepsIndexesWhole", fn: testImportKeepsIndexesWhole},
	{name: "Edges/ExportOrder", fn: testExportOrder},
	{name: "Edges/AdmissionIDs", fn: testAdmissionIDs},
}

// An empty owner or principal is malformed (ValidateToken), never stored.
func testInvalidOwnerAndPrincipal(t *testing.T, s backend.Store) {
	_, _, err := s.OpenSession(ctxOf(t), backend.OpenSessionRequest{ID: "s1", Owner: "", Now: T0})
	wantErr(t, "open a session without owner", err, backend.ErrInvalid)
	_, err = s.GetSession(ctxOf(t), "s1", time.Time{})
	wantErr(t, "session after a refused open", err, backend.ErrNotFound)
	_, _, err = s.OpenSession(ctxOf(t), backend.OpenSessionRequest{ID: "bad id", Owner: Owner, Now: T0})
	wantErr(t, "open a session with a bad id", err, backend.ErrInvalid)
	openSession(t, s, "s1")
	wantErr(t, "grant to an empty principal", s.Grant(ctxOf(t), "s1", backend.Grant{Principal: "", Role: backend.RoleWriter}), backend.ErrInvalid)
	wantErr(t, "grant to a principal with NUL", s.Grant(ctxOf(t), "s1", backend.Grant{Principal: "a\x00b", Role: backend.RoleWriter}), backend.ErrInvalid)
	wantErr(t, "grant without a role", s.Grant(ctxOf(t), "s1", backend.Grant{Principal: Other}), backend.ErrInvalid)
	wantErr(t, "grant of an unknown role", s.Grant(ctxOf(t), "s1", backend.Grant{Principal: Other, Role: "admin"}), backend.ErrInvalid)
	wantErr(t, "grant of producers to a reader", s.Grant(ctxOf(t), "s1", backend.Grant{Principal: Other, Role: backend.RoleReader, Producers: []string{Producer}}), backend.ErrInvalid)
	wantErr(t, "grant of a bad producer name", s.Grant(ctxOf(t), "s1", backend.Grant{Principal: Other, Role: backend.RoleWriter, Producers: []string{"Bad Name"}}), backend.ErrInvalid)
	wantErr(t, "grant to the owner", s.Grant(ctxOf(t), "s1", backend.Grant{Principal: Owner, Role: backend.RoleReader}), backend.ErrInvalid)
	if g := getSession(t, s, "s1").Grants; len(g) != 0 {
		t.Errorf("refused grants left %q", g)
	}
}

// A close reason outside CloseReasons is refused, and nothing ends.
func testCloseReasonInvalid(t *testing.T, s backend.Store) {
	openSession(t, s, "s1")
	for _, reason := range []string{"", "bogus", backend.ReasonCompression} {
		_, err := s.CloseSession(ctxOf(t), "s1", reason, T0)
		wantErr(t, "close with reason "+reason, err, backend.ErrInvalid)
	}
	if tr := getTranscript(t, s, "s1"); tr.Ended() {
		t.Errorf("a refused close ended the transcript: %+v", tr)
	}
}

// Compressing a session whose current transcript has ended is ErrClosed:
// the end (reason, time) is never overwritten and no child is made.
func testCompressClosed(t *testing.T, s backend.Store) {
	openSession(t, s, "s1")
	closed, err := s.CloseSession(ctxOf(t), "s1", "cli_close", at(time.Minute))
	noErr(t, "close", err)
	_, err = s.Compress(ctxOf(t), "s1", "s1.2", at(2*time.Minute))
	wantErr(t, "compress a closed session", err, backend.ErrClosed)
	diff(t, "closed transcript after a refused compress", closed, getTranscript(t, s, "s1"))
	if _, err := s.GetTranscript(ctxOf(t), "s1.2"); err == nil {
		t.Errorf("a refused compress created its child")
	}
	if cur := getSession(t, s, "s1").CurrentTranscript; cur != "s1" {
		t.Errorf("a refused compress moved the session to %q", cur)
	}
	// The child id stays free: for another session, and for a compress
	// that is allowed.
	_, err = s.Compress(ctxOf(t), "s1", "other", at(2*time.Minute))
	wantErr(t, "compress a closed session", err, backend.ErrClosed)
	openSession(t, s, "other")
	_, err = s.Switch(ctxOf(t), "s1", "s1.b", at(3*time.Minute))
	noErr(t, "switch to a new transcript", err)
	_, err = s.Compress(ctxOf(t), "s1", "s1.2", at(4*time.Minute))
	noErr(t, "compress with the child a refused compress named", err)
}

// Removing a viewer that is not there (never was, already removed, or
// expired) is ErrNotFound, as renewing one is; the session must exist.
func testRemoveViewerUnknown(t *testing.T, s backend.Store) {
	openSession(t, s, "s1")
	err := s.RemoveViewer(ctxOf(t), "s1", "no-such-viewer")
	wantErr(t, "remove an unknown viewer", err, backend.ErrNotFound)
	v, err := s.AddViewer(ctxOf(t), "s1", time.Hour, time.Now())
	noErr(t, "add viewer", err)
	noErr(t, "remove viewer", s.RemoveViewer(ctxOf(t), "s1", v.ID))
	wantErr(t, "remove a viewer twice", s.RemoveViewer(ctxOf(t), "s1", v.ID), backend.ErrNotFound)
	gone, err := s.AddViewer(ctxOf(t), "s1", time.Second, time.Now().Add(-time.Hour))
	noErr(t, "add a viewer already expired", err)
	wantErr(t, "remove an expired viewer", s.RemoveViewer(ctxOf(t), "s1", gone.ID), backend.ErrNotFound)
	wantErr(t, "remove a viewer of an unknown session", s.RemoveViewer(ctxOf(t), "ghost", v.ID), backend.ErrNotFound)
}

// A lease or viewer ttl of 0 means the defaults of pkg/backend, never an
// already expired lease.
func testDefaultTTLs(t *testing.T, s backend.Store) {
	openSession(t, s, "s1")
	l, err := s.AcquireLease(ctxOf(t), backend.LeaseRequest{Principal: Owner, Session: "s1", Holder: "A", Now: T0})
	noErr(t, "acquire with ttl 0", err)
	if !l.ExpiresAt.Equal(at(backend.DefaultLeaseTTL)) {
		t.Errorf("lease of ttl 0 expires %v, want %v", l.ExpiresAt, at(backend.DefaultLeaseTTL))
	}
	_, err = s.AcquireLease(ctxOf(t), backend.LeaseRequest{Principal: Owner, Session: "s1", Holder: "B", TTL: time.Second, Now: at(time.Second)})
	wantErr(t, "acquire a lease taken with ttl 0", err, backend.ErrLeaseHeld)
	r, err := s.RenewLease(ctxOf(t), backend.LeaseRequest{Session: "s1", Holder: "A", Epoch: l.Epoch, Now: at(time.Minute)})
	noErr(t, "renew with ttl 0", err)
	if !r.ExpiresAt.Equal(at(time.Minute + backend.DefaultLeaseTTL)) {
		t.Errorf("lease renewed with ttl 0 expires %v, want %v", r.ExpiresAt, at(time.Minute+backend.DefaultLeaseTTL))
	}
	if got := getSession(t, s, "s1").LeaseExpiresAt; !got.Equal(r.ExpiresAt) {
		t.Errorf("session lease expiry %v, want %v", got, r.ExpiresAt)
	}

	now := time.Now().Truncate(time.Second)
	v, err := s.AddViewer(ctxOf(t), "s1", 0, now)
	noErr(t, "add viewer with ttl 0", err)
	if !v.ExpiresAt.Equal(now.Add(backend.DefaultViewerTTL)) {
		t.Errorf("viewer of ttl 0 expires %v, want %v", v.ExpiresAt, now.Add(backend.DefaultViewerTTL))
	}
	if n := getSession(t, s, "s1").Viewers; n != 1 {
		t.Errorf("a viewer of ttl 0 counts as %d live viewers, want 1", n)
	}
	rv, err := s.RenewViewer(ctxOf(t), "s1", v.ID, 0, now)
	noErr(t, "renew viewer with ttl 0", err)
	if !rv.ExpiresAt.Equal(now.Add(backend.DefaultViewerTTL)) {
		t.Errorf("viewer renewed with ttl 0 expires %v, want %v", rv.ExpiresAt, now.Add(backend.DefaultViewerTTL))
	}
}

// A request id conflict names the request id and the admission holding it,
// so an operator can find it (`hermesq show ADM`).
func testConflictMessage(t *testing.T, s backend.Store) {
	openSession(t, s, "s1")
	req := backend.AdmitRequest{Session: "s1", Kind: backend.KindHuman, Principal: Owner, RequestID: "req-7", Payload: Payload("once")}
	first := admit1(t, s, req)
	noErr(t, "admit", first.Err)
	req.Payload = Payload("other")
	res := admit1(t, s, req)
	wantErr(t, "same request id, other payload", res.Err, backend.ErrConflict)
	for _, want := range []string{"req-7", first.Admission.ID, "s1"} {
		if !strings.Contains(res.Err.Error(), want) {
			t.Errorf("conflict %q does not name %q", res.Err, want)
		}
	}
}

// An exported session lists its grants as a JSON array, [] for none, as an
// admission's identities: one form whatever the store.
func testExportGrantsNeverNull(t *testing.T, s backend.Store) {
	openSession(t, s, "a")
	openSession(t, s, "b")
	noErr(t, "grant", s.Grant(ctxOf(t), "b", backend.Grant{Principal: Other, Role: backend.RoleReader}))
	want := map[string]string{"a": `"grants":[]`, "b": `"grants":[{"principal":"` + Other + `","role":"reader"}]`}
	for _, r := range export(t, s) {
		if r.Session == nil {
			continue
		}
		b, err := json.Marshal(r)
		noErr(t, "marshal session record", err)
		if !strings.Contains(string(b), want[r.Session.ID]) {
			t.Errorf("exported session %s: %s, want %s", r.Session.ID, b, want[r.Session.ID])
		}
		delete(want, r.Session.ID)
	}
	if len(want) != 0 {
		t.Errorf("sessions not exported: %v", want)
	}
}

// A malformed request (backend.CheckAdmitRequest) is refused with its own
// ErrInvalid, stores nothing, and leaves the other requests of the call
// alone: a NUL would split an identity or a request key, an empty principal
// would create a session nobody owns.
func testAdmitMalformed(t *testing.T, s backend.Store) {
	openSession(t, s, "s1")
	human := func(mod func(r *backend.AdmitRequest)) backend.AdmitRequest {
		r := backend.AdmitRequest{Session: "s1", Kind: backend.KindHuman, Principal: Owner, Payload: Payload("x"), Now: T0}
		mod(&r)
		return r
	}
	automation := func(mod func(r *backend.AdmitRequest)) backend.AdmitRequest {
		r := autoReq("s1", "x", "ok-identity")
		mod(&r)
		return r
	}
	bad := map[string]backend.AdmitRequest{
		"empty principal":            human(func(r *backend.AdmitRequest) { r.Principal = "" }),
		"new session, no principal":  human(func(r *backend.AdmitRequest) { r.Session, r.Principal, r.CreateSession = "fresh", "", true }),
		"bad session id":             human(func(r *backend.AdmitRequest) { r.Session, r.CreateSession = "bad id", true }),
		"empty payload":              human(func(r *backend.AdmitRequest) { r.Payload = nil }),
		"request id with NUL":        human(func(r *backend.AdmitRequest) { r.RequestID = "a\x00b" }),
		"human with identities":      human(func(r *backend.AdmitRequest) { r.Identities = []string{"h-1"} }),
		"unknown kind":               human(func(r *backend.AdmitRequest) { r.Kind = "robot" }),
		"identity with NUL":          automation(func(r *backend.AdmitRequest) { r.Identities = []string{"a\x00b"} }),
		"empty identity":             automation(func(r *backend.AdmitRequest) { r.Identities = []string{"ok-2", ""} }),
		"no identities":              automation(func(r *backend.AdmitRequest) { r.Identities = nil }),
		"automation with request id": automation(func(r *backend.AdmitRequest) { r.RequestID = "r1" }),
		"bad pinned target":          automation(func(r *backend.AdmitRequest) { r.PinnedTarget = "bad target" }),
	}
	for what, req := range bad {
		good := autoReq("s1", "good", "good-"+what)
		res, err := s.Admit(ctxOf(t), []backend.AdmitRequest{req, good})
		noErr(t, what+": the call", err)
		wantErr(t, what, res[0].Err, backend.ErrInvalid)
		noErr(t, what+": the good request beside it", res[1].Err)
	}
	as := listAdmissions(t, s, "s1", backend.AdmissionFilter{})
	if len(as) != len(bad) {
		t.Errorf("%d admissions, want only the %d good ones", len(as), len(bad))
	}
	for _, a := range as {
		if !strings.HasPrefix(a.Text(), "good") {
			t.Errorf("a malformed request was stored: %+v", a)
		}
	}
	for _, id := range []string{"fresh", "bad id"} {
		if _, err := s.GetSession(ctxOf(t), id, time.Time{}); err == nil {
			t.Errorf("a malformed request created session %q", id)
		}
	}
	for _, ident := range []string{"a", "b", "a\x00b", "h-1", "ok-identity"} {
		if a, err := s.FindIdentity(ctxOf(t), "s1", ident); err == nil {
			t.Errorf("a malformed request holds identity %q: %+v", ident, a)
		}
	}
}

// An import whose record comes before the record it belongs to (a
// transcript before its session…) is malformed input, ErrInvalid, and
// writes nothing: Export writes every session before its records.
func testImportOutOfOrder(t *testing.T, s backend.Store) {
	recs := map[string]backend.Record{
		"transcript before its session": {Transcript: &backend.Transcript{ID: "t1", Session: "s9", CreatedAt: T0}},
		"message before its transcript": {Message: &backend.Message{Transcript: "t2", Seq: 1, Role: backend.RoleNote, Content: "n", CreatedAt: T0}},
		"admission before its session": {Admission: &backend.Admission{ID: "0123456789abcdef0123456789abcdef", Session: "s9", Seq: 1,
			Kind: backend.KindHuman, Principal: Owner, Payload: Payload("x"), Status: backend.StatusQueued, AdmittedAt: T0}},
		"empty record": {},
	}
	for what, r := range recs {
		err := importErr(t, s, []backend.Record{r})
		wantErr(t, "import a "+what, err, backend.ErrInvalid)
	}
	if _, err := s.GetTranscript(ctxOf(t), "t1"); err == nil {
		t.Errorf("a refused import created transcript t1")
	}
	if _, err := s.GetAdmission(ctxOf(t), "0123456789abcdef0123456789abcdef"); err == nil {
		t.Errorf("a refused import created its admission")
	}
	// A batch is refused before anything of it is written.
	err := importErr(t, s, []backend.Record{
		{Session: &backend.SessionRecord{ID: "s5", Owner: Owner, Grants: []backend.Grant{}, CurrentTranscript: "s5", NextSeq: 1, CreatedAt: T0}},
		{Transcript: &backend.Transcript{ID: "s5", Session: "s5", CreatedAt: T0}},
		recs["transcript before its session"],
	})
	wantErr(t, "import a batch with a record out of order", err, backend.ErrInvalid)
	if ss, err := s.ListSessions(ctxOf(t), time.Time{}); err != nil || len(ss) != 0 {
		t.Errorf("sessions after refused imports: %v, %v", ss, err)
	}
	if _, err := s.GetTranscript(ctxOf(t), "s5"); err == nil {
		t.Errorf("a refused batch wrote transcript s5")
	}
}

// A settle with an outcome or message role outside the contract is
// ErrInvalid; a message for a transcript of another session is
// ErrNotFound (a session's settle writes only its own transcripts). Each
// writes nothing: the admission stays running and settles afterwards.
func testSettleMalformed(t *testing.T, s backend.Store) {
	openSession(t, s, "s1")
	openSession(t, s, "s2")
	l := acquire(t, s, "s1", "A", T0)
	a := claim(t, s, l, human(t, s, "s1", "q").ID, T0)
	req := func(mod func(r *backend.SettleRequest)) backend.SettleRequest {
		r := backend.SettleRequest{Session: "s1", AdmissionID: a.ID, Epoch: a.Epoch, Generation: a.Generation,
			Outcome: backend.OutcomeCompleted, Messages: turnMessages("s1", "q", "r"), Now: T0}
		mod(&r)
		return r
	}
	for what, c := range map[string]struct {
		req  backend.SettleRequest
		want error
	}{
		"no outcome":                   {req(func(r *backend.SettleRequest) { r.Outcome = "" }), backend.ErrInvalid},
		"unknown outcome":              {req(func(r *backend.SettleRequest) { r.Outcome = "skipped" }), backend.ErrInvalid},
		"unknown role":                 {req(func(r *backend.SettleRequest) { r.Messages[1].Role = "system" }), backend.ErrInvalid},
		"bad transcript id":            {req(func(r *backend.SettleRequest) { r.Messages[0].Transcript = "bad id" }), backend.ErrInvalid},
		"another session's transcript": {req(func(r *backend.SettleRequest) { r.Messages[1].Transcript = "s2" }), backend.ErrNotFound},
		"unknown transcript":           {req(func(r *backend.SettleRequest) { r.Messages[1].Transcript = "nowhere" }), backend.ErrNotFound},
	} {
		_, err := s.Settle(ctxOf(t), c.req)
		wantErr(t, "settle with "+what, err, c.want)
	}
	for _, tr := range []string{"s1", "s2"} {
		if n := len(listMessages(t, s, tr)); n != 0 {
			t.Errorf("refused settles wrote %d messages to %s", n, tr)
		}
	}
	if got := getAdmission(t, s, a.ID); got.Status != backend.StatusRunning {
		t.Errorf("after refused settles the admission is %s, want running", got.Status)
	}
	settleTurn(t, s, a, "r", T0)
}

// Grants are a set: listed sorted whatever order they were given in, and an
// import of the same session with its grants in another order is a no-op
// (an export of one store imports into another and back).
func testGrantsAreASet(t *testing.T, s backend.Store) {
	openSession(t, s, "s1")
	for _, g := range []backend.Grant{
		{Principal: "zed", Role: backend.RoleOwner},
		{Principal: "bob", Role: backend.RoleWriter, Producers: []string{"watch", Producer}},
		{Principal: "mia", Role: backend.RoleReader},
	} {
		noErr(t, "grant "+g.Principal, s.Grant(ctxOf(t), "s1", g))
	}
	want := []backend.Grant{
		{Principal: "bob", Role: backend.RoleWriter, Producers: []string{Producer, "watch"}},
		{Principal: "mia", Role: backend.RoleReader},
		{Principal: "zed", Role: backend.RoleOwner},
	}
	diff(t, "grants of GetSession", want, getSession(t, s, "s1").Grants)
	var rec *backend.SessionRecord
	for _, r := range export(t, s) {
		if r.Session != nil {
			rec = r.Session
		}
	}
	if rec == nil {
		t.Fatal("export has no session")
	}
	diff(t, "exported grants", want, rec.Grants)
	shuffled := *rec
	shuffled.Grants = []backend.Grant{want[2], want[0], want[1]}
	shuffled.Grants[1].Producers = []string{"watch", Producer}
	noErr(t, "import the session with its grants in another order", importErr(t, s, []backend.Record{{Session: &shuffled}}))
	shuffled.Grants = []backend.Grant{want[2], want[0]}
	wantErr(t, "import the session with a grant less", importErr(t, s, []backend.Record{{Session: &shuffled}}), backend.ErrConflict)
	shuffled.Grants = []backend.Grant{want[0], want[1], {Principal: "zed", Role: backend.RoleReader}}
	wantErr(t, "import the session with a grant of another role", importErr(t, s, []backend.Record{{Session: &shuffled}}), backend.ErrConflict)
}

// An import never breaks an index: a message that would leave a gap in its
// transcript is ErrInvalid; an identity, a request id or a seq already held
// by another admission of the session is ErrConflict, and the holder keeps
// it.
func testImportKeepsIndexesWhole(t *testing.T, s backend.Store) {
	session := func(id string) backend.Record {
		return backend.Record{Session: &backend.SessionRecord{ID: id, Owner: Owner, Grants: []backend.Grant{}, CurrentTranscript: id, NextSeq: 5, CreatedAt: T0}}
	}
	transcript := func(id string) backend.Record {
		return backend.Record{Transcript: &backend.Transcript{ID: id, Session: id, CreatedAt: T0}}
	}
	adm := func(session, id string, seq uint64, mod func(a *backend.Admission)) backend.Record {
		a := &backend.Admission{ID: admID(id), Session: session, Seq: seq, Kind: backend.KindAutomation, Producer: Producer,
			Principal: Owner, Identities: []string{"i-" + id}, Payload: Payload(id), PinnedTarget: session,
			Status: backend.StatusQueued, AdmittedAt: T0}
		mod(a)
		return backend.Record{Admission: a}
	}
	same := func(*backend.Admission) {}

	err := importErr(t, s, []backend.Record{session("g"), transcript("g"),
		{Message: &backend.Message{Transcript: "g", Seq: 2, Role: backend.RoleNote, Content: "after a gap", CreatedAt: T0}}})
	wantErr(t, "import a message after a gap", err, backend.ErrInvalid)

	noErr(t, "import a session", importErr(t, s, []backend.Record{session("s1"), transcript("s1"),
		adm("s1", "a1", 1, func(a *backend.Admission) { a.Identities = []string{"shared"} }),
		adm("s1", "h1", 2, func(a *backend.Admission) {
			a.Kind, a.Producer, a.Identities, a.RequestID, a.PinnedTarget = backend.KindHuman, "", nil, "rq", ""
		}),
	}))
	for what, r := range map[string]backend.Record{
		"an identity held by another admission": adm("s1", "a2", 3, func(a *backend.Admission) { a.Identities = []string{"shared"} }),
		"a request id held by another admission": adm("s1", "h2", 4, func(a *backend.Admission) {
			a.Kind, a.Producer, a.Identities, a.RequestID, a.PinnedTarget = backend.KindHuman, "", nil, "rq", ""
		}),
		"a seq held by another admission": adm("s1", "a3", 1, same),
	} {
		wantErr(t, "import "+what, importErr(t, s, []backend.Record{r}), backend.ErrConflict)
	}
	if a, err := s.FindIdentity(ctxOf(t), "s1", "shared"); err != nil || a.ID != admID("a1") {
		t.Errorf("identity shared after refused imports: %+v, %v; want admission a1", a, err)
	}
	res := admit1(t, s, backend.AdmitRequest{Session: "s1", Kind: backend.KindHuman, Principal: Owner, RequestID: "rq", Payload: Payload("h1")})
	noErr(t, "request id after refused imports", res.Err)
	if res.Result != backend.ResultDuplicate || res.Admission.ID != admID("h1") {
		t.Errorf("request id rq after refused imports: %s %s, want a duplicate of h1", res.Result, res.Admission.ID)
	}
}

// admID turns a short test name into an admission id by the live rules (32
// lower-case hex digits).
func admID(name string) string {
	h := hex.EncodeToString([]byte(name))
	return strings.Repeat("0", 32-len(h)) + h
}

// Export writes, for each session by id, the session, then its transcripts
// by id, each followed by its messages in seq order, then its admissions by
// seq: one order whatever the store, so two exports compare line by line.
func testExportOrder(t *testing.T, s backend.Store) {
	openSession(t, s, "s1")
	_, err := s.Switch(ctxOf(t), "s1", "a-branch", at(time.Minute))
	noErr(t, "switch", err)
	_, err = s.Compress(ctxOf(t), "s1", "0-child", at(2*time.Minute))
	noErr(t, "compress", err)
	openSession(t, s, "r0")
	var got []string
	for _, r := range export(t, s) {
		switch {
		case r.Session != nil:
			got = append(got, "session "+r.Session.ID)
		case r.Transcript != nil:
			got = append(got, "transcript "+r.Transcript.ID)
		}
	}
	want := []string{"session r0", "transcript r0", "session s1", "transcript 0-child", "transcript a-branch", "transcript s1"}
	diff(t, "export order", want, got)
}

// An admission id names one admission in the whole store. A request re-sent
// with its id (its reply was lost) finds its admission as a duplicate; any
// other request with a taken id is ErrConflict naming the id, and writes
// nothing. A claim names an admission of its own session, else ErrNotFound.
func testAdmissionIDs(t *testing.T, s backend.Store) {
	openSession(t, s, "s1")
	openSession(t, s, "s2")
	const id = "00112233445566778899aabbccddeeff"
	req := autoReq("s1", "once", "e1", "e2")
	req.ID = id
	first := admit1(t, s, req)
	noErr(t, "admit with an id", first.Err)
	if first.Admission.ID != id {
		t.Fatalf("admission id %q, want %q", first.Admission.ID, id)
	}
	again := admit1(t, s, req)
	noErr(t, "the same request re-sent", again.Err)
	if again.Result != backend.ResultDuplicate || again.Admission.ID != id {
		t.Errorf("the same request re-sent: %s %s, want a duplicate of %s", again.Result, again.Admission.ID, id)
	}
	diff(t, "re-sent identities", map[string]string{"e1": backend.ResultDuplicate, "e2": backend.ResultDuplicate}, again.Identities)
	diff(t, "re-sent admission", first.Admission, again.Admission)

	other := autoReq("s1", "another payload", "e3")
	other.ID = id
	elsewhere := req
	elsewhere.Session = "s2"
	elsewhere.Identities = []string{"e4"}
	for what, r := range map[string]backend.AdmitRequest{"another request": other, "a request to another session": elsewhere} {
		res := admit1(t, s, r)
		wantErr(t, "admission id taken, by "+what, res.Err, backend.ErrConflict)
		if !strings.Contains(res.Err.Error(), id) {
			t.Errorf("%s: conflict %q does not name the id", what, res.Err)
		}
	}
	if n := len(listAdmissions(t, s, "s2", backend.AdmissionFilter{})); n != 0 {
		t.Errorf("a refused id wrote %d admissions to s2", n)
	}
	if n := len(listAdmissions(t, s, "s1", backend.AdmissionFilter{})); n != 1 {
		t.Errorf("s1 has %d admissions, want 1", n)
	}
	if a := getAdmission(t, s, id); a.Session != "s1" || a.Text() != "once" {
		t.Errorf("admission %s after refused reuses: %+v", id, a)
	}
	for _, ident := range []string{"e3", "e4"} {
		if _, err := s.FindIdentity(ctxOf(t), "", ident); err == nil {
			t.Errorf("a refused request holds identity %s", ident)
		}
	}

	l1 := acquire(t, s, "s1", "A", T0)
	l2 := acquire(t, s, "s2", "A", T0)
	_, err := s.Claim(ctxOf(t), backend.ClaimRequest{Session: "s1", AdmissionID: "no-such-admission", Epoch: l1.Epoch, Mode: backend.ModeTurn, Now: T0})
	wantErr(t, "claim an unknown admission", err, backend.ErrNotFound)
	_, err = s.Claim(ctxOf(t), backend.ClaimRequest{Session: "s2", AdmissionID: id, Epoch: l2.Epoch, Mode: backend.ModeTurn, Now: T0})
	wantErr(t, "claim another session's admission", err, backend.ErrNotFound)
	if a := getAdmission(t, s, id); a.Status != backend.StatusQueued {
		t.Errorf("refused claims moved the admission to %s", a.Status)
	}
}
