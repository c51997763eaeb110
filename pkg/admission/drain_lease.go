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
		sent := time.Now()
		l, err := d.s.Store.AcquireLease(ctx, backend.LeaseRequest{
			Session: d.session, Holder: d.opt.Holder, Principal: d.principal, TTL: d.opt.Lease, Now: d.s.now(),
		})
		if err == nil {
			d.lease = l
			d.renewedAt.Store(sent.UnixNano())
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
// and its running handler is stopped (watchLease). Other renewal errors
// are retried at the next tick; when they go on until the lease could
// lapse, watchLease stops the running handler too.
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
		sent := time.Now()
		_, err := d.s.Store.RenewLease(ctx, backend.LeaseRequest{
			Session: d.session, Holder: d.opt.Holder, Epoch: d.lease.Epoch, TTL: d.opt.Lease, Now: d.s.now(),
		})
		cancel()
		if err == nil {
			d.renewedAt.Store(sent.UnixNano())
			if l := d.turnLease.Load(); l != nil {
				l.renewed()
			}
		}
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

// lastRenewal is when the last successful acquire or renewal was sent.
func (d *drainer) lastRenewal() time.Time { return time.Unix(0, d.renewedAt.Load()) }

func (d *drainer) leaseLost() error {
	select {
	case <-d.lost:
		return d.lostErr
	default:
		return nil
	}
}
