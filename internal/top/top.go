package top

import (
	"context"
	"io"

	"github.com/hermesq/hermesq/pkg/admission"
	"github.com/hermesq/hermesq/pkg/stats"
)

// Sorts are top's sort orders, in the order the s key cycles through them.
var Sorts = []string{"session", "depth", "age", "unknown"}

// Options are what top shows and where.
type Options struct {
	Service *admission.Service
	// Changes are the store's change notifications (Store.Subscribe).
	Changes <-chan string
	Sort    string // one of Sorts
	// Producers reads the producers' outboxes (nil: none shown).
	Producers func(context.Context) ([]stats.Producer, error)
	In        io.Reader
	Out       io.Writer
}

// View shows top on o.Out, a terminal, until the operator quits or ctx
// ends, and restores the terminal (tui.Run).
type View func(ctx context.Context, o Options) error
