package storediff

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"

	"github.com/hermesq/hermesq/pkg/backend"
)

var hexID = regexp.MustCompile(`\b[0-9a-f]{32}\b`)

// norm marshals v and replaces every generated id by its name of
// appearance.
func (r *Runner) norm(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return "marshal: " + err.Error()
	}
	// Empty and absent are alike (nil or empty slices and maps, null,
	// zero values): dropped from objects.
	var x any
	if json.Unmarshal(b, &x) == nil {
		b, _ = json.Marshal(dropEmpty(x))
	}
	return hexID.ReplaceAllStringFunc(string(b), func(id string) string {
		n, ok := r.names[id]
		if !ok {
			n = fmt.Sprintf("id%d", len(r.names))
			r.names[id] = n
		}
		return n
	})
}

func dropEmpty(x any) any {
	switch v := x.(type) {
	case map[string]any:
		for k, e := range v {
			e = dropEmpty(e)
			if isEmpty(e) {
				delete(v, k)
			} else {
				v[k] = e
			}
		}
		return v
	case []any:
		for i, e := range v {
			v[i] = dropEmpty(e)
		}
		return v
	}
	return x
}

func isEmpty(x any) bool {
	switch v := x.(type) {
	case nil:
		return true
	case bool:
		return !v
	case string:
		return v == "" || v == "0001-01-01T00:00:00Z"
	case float64:
		return v == 0
	case map[string]any:
		return len(v) == 0
	case []any:
		return len(v) == 0
	}
	return false
}

func (r *Runner) see(as ...backend.Admission) {
	for _, a := range as {
		if a.ID != "" && !r.admSeen[a.ID] {
			r.admSeen[a.ID] = true
			r.adm = append(r.adm, a.ID)
		}
	}
}

// ErrName is an error as the stores are compared on: its code, and the
// specific condition it wraps, if any.
func ErrName(err error) string {
	if err == nil {
		return ""
	}
	code := string(backend.CodeOf(err))
	for _, c := range []struct {
		e    error
		name string
	}{
		{backend.ErrBusy, "busy"}, {backend.ErrClosed, "closed"}, {backend.ErrLeaseHeld, "lease-held"},
		{backend.ErrNotHead, "not-head"}, {backend.ErrWatched, "watched"}, {backend.ErrMoved, "moved"},
	} {
		if errors.Is(err, c.e) {
			return code + "/" + c.name
		}
	}
	return code
}

type errReply struct {
	Err string `json:"err"`
}

type admitView struct {
	Result         string
	Admission      backend.Admission
	Identities     map[string]string
	Duplicates     []string
	PayloadDiffers bool
	Err            string `json:",omitempty"`
}

func admitViews(res []backend.AdmitResult) []admitView {
	out := make([]admitView, len(res))
	for i, x := range res {
		out[i] = admitView{x.Result, x.Admission, x.Identities, x.Duplicates, x.PayloadDiffers, ErrName(x.Err)}
	}
	return out
}
