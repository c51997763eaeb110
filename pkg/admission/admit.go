package admission

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/hermesq/hermesq/pkg/backend"
)

// Admit validates one input (every failure wraps backend.ErrInvalid) and
// commits it with Store.Admit. Human input to an unknown session creates it
// with the principal as owner. A duplicate is a success: the result says
// "duplicate" and the error is nil. The request's own failure (conflict,
// closed, forbidden) is returned both as the error and in the result's Err.
func (s *Service) Admit(ctx context.Context, in Input) (backend.AdmitResult, error) {
	req, err := s.request(in)
	if err != nil {
		return backend.AdmitResult{Err: err}, err
	}
	res, err := s.Store.Admit(ctx, []backend.AdmitRequest{req})
	if err != nil {
		return backend.AdmitResult{Err: err}, err
	}
	if len(res) != 1 {
		err := fmt.Errorf("admit: store returned %d results for 1 request: %w", len(res), backend.ErrInternal)
		return backend.AdmitResult{Err: err}, err
	}
	return res[0], res[0].Err
}

// AdmitBatch admits many inputs, one result each, in order. Each invalid
// input gets its own Err (wrapping backend.ErrInvalid) and is not sent; the
// valid ones go to ONE Store.Admit call, so a batch costs one store
// round-trip. The returned error is for the call as a whole (store
// unavailable): then every valid input's result carries it too and nothing
// was admitted. It is Commit of Prepare.
func (s *Service) AdmitBatch(ctx context.Context, ins []Input) ([]backend.AdmitResult, error) {
	return s.Commit(ctx, s.Prepare(ins))
}

// Prepared is a batch of inputs validated for one Store.Admit call
// (Prepare), not yet sent (Commit). It holds no reference to the inputs.
type Prepared struct {
	out  []backend.AdmitResult // invalid inputs' results, in input order
	reqs []backend.AdmitRequest
	at   []int // the input each request is of
}

// Prepare validates a batch of inputs, giving each valid one its admission
// id and time, without calling the store: a caller may prepare the next
// batch while the store commits this one.
func (s *Service) Prepare(ins []Input) *Prepared {
	p := &Prepared{
		out:  make([]backend.AdmitResult, len(ins)),
		reqs: make([]backend.AdmitRequest, 0, len(ins)),
		at:   make([]int, 0, len(ins)),
	}
	for i, in := range ins {
		req, err := s.request(in)
		if err != nil {
			p.out[i].Err = err
			continue
		}
		p.reqs = append(p.reqs, req)
		p.at = append(p.at, i)
	}
	return p
}

// Commit sends a prepared batch in one Store.Admit call and returns one
// result an input, as AdmitBatch does. A Prepared is committed once.
func (s *Service) Commit(ctx context.Context, p *Prepared) ([]backend.AdmitResult, error) {
	out := p.out
	if len(p.reqs) == 0 {
		return out, nil
	}
	res, err := s.Store.Admit(ctx, p.reqs)
	if err == nil && len(res) != len(p.reqs) {
		err = fmt.Errorf("admit: store returned %d results for %d requests: %w", len(res), len(p.reqs), backend.ErrInternal)
	}
	if err != nil {
		for _, i := range p.at {
			out[i].Err = err
		}
		return out, err
	}
	for j, i := range p.at {
		out[i] = res[j]
	}
	return out, nil
}

type admitJSON struct {
	Result string `json:"result"`
	// Admission is the admission's JSON (backend.Admission.MarshalJSON)
	// as a json.RawMessage, made once here, so that an encoder trusting
	// raw messages need not parse a marshaler's output again to check it
	// (a batch prints one a line); the backend.Admission itself where its
	// JSON cannot be made, for the encoder to report why.
	Admission      any               `json:"admission"`
	Identities     map[string]string `json:"identities"`
	PayloadDiffers bool              `json:"payload_differs"`
}

type errorJSON struct {
	Error   backend.Code `json:"error"`
	Message string       `json:"message"`
}

// AdmitJSON is the contract's admit result shape:
// {"result","admission":{…},"identities":{…},"payload_differs":false}
// (docs/contract.md §11). A result with an Err becomes the error shape
// {"error":"<code>","message":"…"}.
func AdmitJSON(r backend.AdmitResult) any {
	if r.Err != nil {
		return errorJSON{Error: backend.CodeOf(r.Err), Message: r.Err.Error()}
	}
	ids := r.Identities
	if ids == nil {
		ids = map[string]string{}
	}
	// The admission as its own JSON, which the printers copy as it is;
	// the struct (boxed only then: it is large) where that fails, for the
	// printer to report.
	var adm any
	if b, err := r.Admission.MarshalJSON(); err == nil {
		adm = json.RawMessage(b)
	} else {
		adm = r.Admission
	}
	return admitJSON{Result: r.Result, Admission: adm, Identities: ids, PayloadDiffers: r.PayloadDiffers}
}
