package storediff

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hermesq/hermesq/pkg/admission"
	"github.com/hermesq/hermesq/pkg/backend"
)

var (
	roles        = []backend.GrantRole{backend.RoleReader, backend.RoleWriter, backend.RoleOwner, "boss"}
	outcomes     = []backend.Outcome{backend.OutcomeCompleted, backend.OutcomeFailed, backend.OutcomeInterrupted, backend.OutcomeCancelled, "bogus"}
	resolutions  = []backend.Resolution{backend.ResolveCompleted, backend.ResolveInterrupted, backend.ResolveRequeue, "bogus"}
	closeReasons = backend.CloseReasons
)

const badVariants = 9

// Step is what one operation did on one store, normalised: the reply (or
// the error's code), then the session's state after it.
type Step struct {
	Op    string
	Reply string
	State string
}

func (s Step) String() string { return s.Op + "\n    => " + s.Reply + "\n    state " + s.State }

// Runner applies operations to one store and normalises what it answers.
type Runner struct {
	St    backend.Store
	Svc   *admission.Service
	Clock time.Time

	names   map[string]string // raw id -> "id<k>", by order of appearance
	adm     []string          // admission ids by order of appearance
	admSeen map[string]bool
	viewers []string
}

// NewRunner returns a runner over st with its clock at T0.
func NewRunner(st backend.Store) *Runner {
	r := &Runner{St: st, Clock: T0, names: map[string]string{}, admSeen: map[string]bool{}}
	r.Svc = &admission.Service{Store: st, Now: func() time.Time { return r.Clock }}
	return r
}

func (r *Runner) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 30*time.Second)
}

// Apply runs one operation and returns its normalised step.
func (r *Runner) Apply(o Op) Step {
	r.Clock = r.Clock.Add(time.Duration(o.Dt) * time.Second)
	ctx, cancel := r.ctx()
	defer cancel()
	v, err := r.apply(ctx, o)
	st := Step{Op: o.String()}
	switch {
	case errors.Is(err, errNothing):
		st.Reply = "nothing to act on"
	case err != nil:
		st.Reply = r.norm(errReply{ErrName(err)})
	default:
		st.Reply = r.norm(v)
	}
	st.State = r.state(ctx, sessions[o.S])
	return st
}

type stateView struct {
	Owner             string
	Grants            []backend.Grant
	CurrentTranscript string
	Closed            bool
	Epoch, Generation uint64
	LeaseHolder       string
	LeaseExpiresAt    time.Time
	NextSeq           uint64
	Queued, Running   int
	Unknown, Viewers  int
	Admissions        []string // id:status:outcome, seq order
}

func (r *Runner) state(ctx context.Context, sid string) string {
	s, err := r.St.GetSession(ctx, sid, r.Clock)
	if err != nil {
		return r.norm(errReply{ErrName(err)})
	}
	v := stateView{s.Owner, s.Grants, s.CurrentTranscript, s.Closed, s.Epoch, s.Generation, s.LeaseHolder,
		s.LeaseExpiresAt, s.NextSeq, s.Queued, s.Running, s.Unknown, s.Viewers, nil}
	as, err := r.St.ListAdmissions(ctx, sid, backend.AdmissionFilter{})
	if err != nil {
		v.Admissions = []string{"list: " + ErrName(err)}
	}
	for _, a := range as {
		v.Admissions = append(v.Admissions, fmt.Sprintf("%d:%s:%s:%s", a.Seq, a.ID, a.Status, a.Outcome))
	}
	return r.norm(v)
}

func exportRecords(ctx context.Context, st backend.Store) ([]backend.Record, error) {
	var recs []backend.Record
	err := st.Export(ctx, func(rec backend.Record) error {
		recs = append(recs, rec)
		return nil
	})
	return recs, err
}

// Export returns the store's export as normalised lines, one a record.
func (r *Runner) Export() ([]string, error) {
	ctx, cancel := r.ctx()
	defer cancel()
	recs, err := exportRecords(ctx, r.St)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(recs))
	for i, rec := range recs {
		out[i] = r.norm(rec)
	}
	return out, nil
}

// Trace is the steps of a sequence on one store and its final export.
type Trace struct {
	Steps  []Step
	Export []string
	// RoundTrip is "" when the export, imported into a fresh store of
	// another kind, is exported back the same; else what differs.
	RoundTrip string
}

func (t Trace) String() string {
	var b strings.Builder
	for i, s := range t.Steps {
		fmt.Fprintf(&b, "%3d %s\n", i, s)
	}
	for _, l := range t.Export {
		fmt.Fprintf(&b, "export %s\n", l)
	}
	return b.String()
}
