package cli

import (
	"context"
	"syscall"
)

// signalWatch cancels a command's context on SIGINT or SIGTERM and keeps
// which signal did it, for the command to return as its *signalError
// (exit 130/143).
type signalWatch struct {
	cancel context.CancelFunc
	stop   func()
	done   chan struct{}
	caught *signalError
}

// watchSignals returns ctx cancelled by SIGINT or SIGTERM. The caller
// defers Stop, and calls Caught once its work is over.
func (f *Factory) watchSignals(ctx context.Context, op string) (context.Context, *signalWatch) {
	ctx, cancel := context.WithCancel(ctx)
	sigs, stop := f.Signals(syscall.SIGINT, syscall.SIGTERM)
	w := &signalWatch{cancel: cancel, stop: stop, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		select {
		case s := <-sigs:
			w.caught = &signalError{sig: s, op: op}
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, w
}

// Caught ends the watch's context and reports the signal that cancelled
// it, nil when none did.
func (w *signalWatch) Caught() *signalError {
	w.cancel()
	<-w.done
	return w.caught
}

// Stop stops listening for the signals.
func (w *signalWatch) Stop() {
	w.cancel()
	w.stop()
}
