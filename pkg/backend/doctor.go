package backend

import "context"

// Finding is one result of a health check: what was checked, its status,
// what was seen, and how to repair it when it is not ok.
type Finding struct {
	Check  string `json:"check"`
	Status string `json:"status"` // ok, warn or fail
	Detail string `json:"detail"`
	Repair string `json:"repair,omitempty"`
}

// Finding statuses.
const (
	FindingOK   = "ok"
	FindingWarn = "warn"
	FindingFail = "fail"
)

// Doctor is implemented by stores that can check their own health beyond
// opening (hermesq doctor): schema version, free pages, file modes,
// consistency, orphaned lookups. It reads only.
type Doctor interface {
	Doctor(ctx context.Context) ([]Finding, error)
}
