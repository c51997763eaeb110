package admission

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hermesq/hermesq/pkg/backend"
)

// acquire takes the drain lease, waiting for a held one with opt.Wait.
func (d *drainer) acquire(ctx context.Context) error {
	var b backoff
	for {
		l, err := d.s.Store.AcquireLease(ctx, backend.LeaseRequest{
			Session: d.session, Holder: d.opt.Holder, TTL: d.opt.Lease, Now: d.s.now(),
		})
		if err == nil {
			d.lease = l
			return nil
		}
		if !d.opt.Wait || !errors.Is(err, backend.ErrLeaseHeld) {
			return fmt.Errorf("drain %s: %w", d.session, err)
		}
		wait := b.next()
		d.opt.Log("drain %s: lease held by another drainer; waiting %s", d.session, wait)
		if !sleep(ctx, wait) {
			return fmt.Errorf("drain %s: waiting for the lease: %w", d.session, ctx.Err())
		}
	}
}

// renew extends the lease every Lease/3 until stop is closed. A fenced
// renewal means a newer drainer took over: the drainer stops taking work
// (its running turn's settle will be fenced too). Other renewal errors are
// retried at the next tick, while the lease has time left.
func (d *drainer) renew(stop <-chan struct{}) {
	t := time.NewTicker(d.opt.Lease / 3)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), d.opt.Lease/3)
		_, err := d.s.Store.RenewLease(ctx, backend.LeaseRequest{
			Session: d.session, Holder: d.opt.Holder, Epoch: d.lease.Epoch, TTL: d.opt.Lease, Now: d.s.now(),
		})
		cancel()
		if errors.Is(err, backend.ErrFenced) {
			d.lostOnce.Do(func() {
				d.lostErr = fmt.Errorf("drain %s: lease of epoch %d lost: %w", d.session, d.lease.Epoch, err)
				close(d.lost)
			})
			d.opt.Log("drain %s: lease lost: %v", d.session, err)
			return
		}
		if err != nil {
			d.opt.Log("drain %s: renew lease: %v", d.session, err)
		}
	}
}

func (d *drainer) leaseLost() error {
	select {
	case <-d.lost:
		return d.lostErr
	default:
		return nil
	}
}
