package producerhost

import (
	"fmt"
	"sort"
	"sync"
	"time"
)

// Timing is where the time of producers run went, by plugin:
//
//   - RPC: the calls to the plugin (Poll, Settle) less the time the plugin
//     reports it spent serving them: the transport (gRPC over mutual TLS,
//     serialisation) and the plugin's process around its producer;
//   - Outbox: the time the plugin reports for its producer's Poll and
//     Settle, measured in the plugin (for the built-in plugins: their bbolt
//     outbox); 0 for a plugin built before it reported it, whose calls
//     then count as RPC;
//   - Store: the admission batches;
//   - Other: the rest of the plugin's run (its start and handshake, the
//     settlement policy, pauses between polls).
//
// A poll's offers are settled in one call (a plugin built before batched
// settles gets a Settle each, at once: their served times are then capped
// at the wall time they took together). While a plugin has a backlog, the
// host polls it for the next round and settles the round before while the
// store admits (see Host.round), so the shares are of the run's time and
// may add up to more than all of it; Other is what is left outside them.
// Safe for concurrent use; a nil *Timing records nothing.
type Timing struct {
	mu sync.Mutex
	// Over every plugin.
	RPC, Outbox, Store time.Duration
	Admitted           int
	by                 map[string]*PluginTiming
}

// PluginTiming is where one plugin's run went (see Timing).
type PluginTiming struct {
	Name                     string
	Wall, RPC, Outbox, Store time.Duration
	Polls, Offers, Admitted  int
}

// Other is the plugin's run time outside RPC, Outbox and Store.
func (p PluginTiming) Other() time.Duration { return max(p.Wall-p.RPC-p.Outbox-p.Store, 0) }

// String is the line producers run --timing prints for the plugin, e.g.
//
//	10000 events admitted in 3.210s (3115/s), 40 polls: rpc 0.412s 12.8%, outbox 1.500s 46.7%, store 1.100s 34.3%, other 0.198s 6.2%
//
// Each share is of the run's time; where polls and settles overlapped the
// store's admissions, they add up to more than 100% and other is 0.
func (p PluginTiming) String() string {
	wall := p.Wall
	rate := 0.0
	if wall > 0 {
		rate = float64(p.Admitted) / wall.Seconds()
	}
	share := func(d time.Duration) string {
		pc := 0.0
		if wall > 0 {
			pc = 100 * float64(d) / float64(wall)
		}
		return fmt.Sprintf("%.3fs %.1f%%", d.Seconds(), pc)
	}
	return fmt.Sprintf("%d events admitted in %.3fs (%.0f/s), %d polls: rpc %s, outbox %s, store %s, other %s",
		p.Admitted, wall.Seconds(), rate, p.Polls,
		share(p.RPC), share(p.Outbox), share(p.Store), share(p.Other()))
}

// Plugins returns each plugin's timing, by name.
func (t *Timing) Plugins() []PluginTiming {
	if t == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]PluginTiming, 0, len(t.by))
	for _, p := range t.by {
		out = append(out, *p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func (t *Timing) plugin(name string) *PluginTiming {
	if t.by == nil {
		t.by = map[string]*PluginTiming{}
	}
	p := t.by[name]
	if p == nil {
		p = &PluginTiming{Name: name}
		t.by[name] = p
	}
	return p
}

// round records one round of plugin name: its poll's time rpc, of which
// the plugin served outbox, its admission batch's time, the offers it
// took and the events admitted.
func (t *Timing) round(name string, rpc, outbox, store time.Duration, offers, admitted int) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.addCalls(name, rpc, outbox)
	p := t.plugin(name)
	p.Store += store
	p.Polls++
	p.Offers += offers
	p.Admitted += admitted
	t.Store += store
	t.Admitted += admitted
}

// calls records plugin name's calls outside a round's poll (the round's
// settle): their time rpc, of which the plugin served outbox.
func (t *Timing) calls(name string, rpc, outbox time.Duration) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.addCalls(name, rpc, outbox)
}

// addCalls adds calls' time rpc, of which the plugin served outbox (at
// most rpc), to plugin name's and the total; t.mu is held.
func (t *Timing) addCalls(name string, rpc, outbox time.Duration) {
	outbox = min(outbox, rpc)
	p := t.plugin(name)
	p.RPC += rpc - outbox
	p.Outbox += outbox
	t.RPC += rpc - outbox
	t.Outbox += outbox
}

// ran records the wall time of plugin name's run.
func (t *Timing) ran(name string, wall time.Duration) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.plugin(name).Wall += wall
}
