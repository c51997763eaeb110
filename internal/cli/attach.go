package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/hermesq/hermesq/pkg/admission"
	"github.com/hermesq/hermesq/pkg/backend"
)

type attachOptions struct {
	f *Factory

	Session   string
	EndReason string
	TTL       time.Duration
}

func newAttachCmd(f *Factory) *cobra.Command {
	o := &attachOptions{f: f}
	cmd := &cobra.Command{
		Use:   "attach SESSION [--end-reason R] [--ttl 60s]",
		Short: "Watch a session: hold a viewer lease and stream its transcript",
		Long: `Attach holds a viewer lease on the session (renewed every --ttl/3) and prints
the messages of the session's current transcript, then new ones as they
arrive, following it across compression. It stops on SIGINT, SIGTERM or end
of stdin, removes the viewer and, with --end-reason, closes the session with
that reason (exit 4 when the session is busy).

While attached, automation input to an open transcript runs as a turn.
Text output is one "[seq] role: content" entry a message; with -o json or
jsonl, one message object a line (the stream has no end to close an array).`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeSessionArg(f),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Session = args[0]
			return runAttach(cmd.Context(), o)
		},
	}
	cmd.Flags().StringVar(&o.EndReason, "end-reason", "", "close the session with this reason when detaching: "+strings.Join(backend.CloseReasons, ", "))
	cmd.Flags().DurationVar(&o.TTL, "ttl", defaultViewerTTL, "viewer lease TTL, renewed every third of it, at least 100ms")
	_ = cmd.RegisterFlagCompletionFunc("end-reason", fixedCompletion(backend.CloseReasons...))
	return cmd
}

func runAttach(ctx context.Context, o *attachOptions) error {
	p, err := o.f.printer()
	if err != nil {
		return err
	}
	if err := backend.ValidateID("session", o.Session); err != nil {
		return err
	}
	if o.EndReason != "" && !slices.Contains(backend.CloseReasons, o.EndReason) {
		return backend.Errorf(backend.ErrInvalid, "end reason %q: want one of %s", o.EndReason, strings.Join(backend.CloseReasons, ", "))
	}
	if o.TTL < admission.MinLease {
		return backend.Errorf(backend.ErrInvalid, "attach --ttl %s: must be at least %s", o.TTL, admission.MinLease)
	}
	svc, err := o.f.Admission()
	if err != nil {
		return err
	}
	st := svc.Store
	cfg, err := o.f.Config()
	if err != nil {
		return err
	}
	act := backend.ActInspect
	if o.EndReason != "" {
		act = backend.ActOperate // detaching closes the session
	}
	if _, err := admission.Authorize(ctx, st, o.Session, cfg.Principal, act, ""); err != nil {
		return err
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sigs, stop := o.f.Signals(syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	go func() {
		select {
		case <-sigs:
			cancel()
		case <-ctx.Done():
		}
	}()

	// Subscribe before the first read, so no change between the two is missed.
	changes, err := st.Subscribe(ctx)
	if err != nil {
		return err
	}
	v, err := svc.AddViewer(ctx, o.Session, o.TTL)
	if err != nil {
		return err
	}
	if p.text() && o.f.IO.IsStderrTTY() {
		fmt.Fprintf(o.f.IO.ErrOut, "hermesq: attached to %s as viewer %s (Ctrl-C or end of input to detach)\n", o.Session, v.ID)
	}

	w := &transcriptWatch{st: st, p: p, session: o.Session}
	if err := w.catchUp(ctx); err != nil && ctx.Err() == nil {
		detach(st, o, v.ID)
		return err
	}
	// End of stdin detaches, as does a signal.
	go func() {
		_, _ = io.Copy(io.Discard, o.f.IO.In)
		cancel()
	}()

	beat := time.NewTicker(o.TTL / 3)
	defer beat.Stop()
	var loopErr error
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case s, ok := <-changes:
			if !ok {
				break loop
			}
			if s != o.Session {
				continue
			}
		case <-beat.C:
			if _, err := st.RenewViewer(ctx, o.Session, v.ID, o.TTL, time.Time{}); err != nil {
				if ctx.Err() != nil {
					break loop
				}
				if !errors.Is(err, backend.ErrNotFound) {
					loopErr = err
					break loop
				}
				// The lease lapsed (a stall longer than the TTL): take a new one.
				nv, err := svc.AddViewer(ctx, o.Session, o.TTL)
				if err != nil {
					loopErr = err
					break loop
				}
				v = nv
			}
		}
		if err := w.catchUp(ctx); err != nil {
			if ctx.Err() == nil {
				loopErr = err
			}
			break loop
		}
	}
	if loopErr == nil {
		// Print what was committed before the stop but not yet announced
		// by Subscribe (asynchronous by contract).
		fctx, fcancel := context.WithTimeout(context.Background(), 10*time.Second)
		loopErr = w.catchUp(fctx)
		fcancel()
	}
	if err := detach(st, o, v.ID); err != nil && loopErr == nil {
		loopErr = err
	}
	return loopErr
}

// detach removes the viewer and, with --end-reason, closes the session. It
// runs after ctx has ended, so it has its own bounded context.
func detach(st backend.Store, o *attachOptions, viewer string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rmErr := st.RemoveViewer(ctx, o.Session, viewer)
	if errors.Is(rmErr, backend.ErrNotFound) {
		rmErr = nil
	}
	if o.EndReason == "" {
		return rmErr
	}
	if _, err := st.CloseSession(ctx, o.Session, o.EndReason, o.f.Now()); err != nil {
		return fmt.Errorf("close %s on detach: %w", o.Session, err)
	}
	return rmErr
}

// transcriptWatch prints the messages of a session's current transcript
// that it has not printed yet, following the session to a new current
// transcript (compression, switch).
type transcriptWatch struct {
	st         backend.Store
	p          *printer
	session    string
	transcript string
	lastSeq    uint64
}

func (w *transcriptWatch) catchUp(ctx context.Context) error {
	s, err := w.st.GetSession(ctx, w.session, time.Time{})
	if err != nil {
		return err
	}
	if s.CurrentTranscript != w.transcript {
		// Messages the old transcript received since the last look (the
		// turn that ran just before a compression or switch) are printed
		// before following the session to its new current transcript.
		if w.transcript != "" {
			if err := w.printNew(ctx); err != nil {
				return err
			}
		}
		w.transcript, w.lastSeq = s.CurrentTranscript, 0
	}
	return w.printNew(ctx)
}

// printNew prints the watched transcript's messages after lastSeq.
func (w *transcriptWatch) printNew(ctx context.Context) error {
	ms, err := w.st.ListMessages(ctx, w.transcript, w.lastSeq, 0)
	if err != nil {
		return err
	}
	for _, m := range ms {
		if err := w.p.line(m, func(out io.Writer) error { return messageText(out, m) }); err != nil {
			return err
		}
		w.lastSeq = m.Seq
	}
	return nil
}
