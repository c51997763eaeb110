package cli

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/spf13/cobra"

	"github.com/hermesq/hermesq/internal/termtext"
	"github.com/hermesq/hermesq/pkg/admission"
	"github.com/hermesq/hermesq/pkg/backend"
)

// topRefresh is how often top reads the store without a change
// notification, so ages keep moving on a quiet store.
const topRefresh = 5 * time.Second

// Sort orders of top, in the order the s key cycles through them.
var topSorts = []string{"session", "depth", "age", "unknown"}

func newTopCmd(f *Factory) *cobra.Command {
	var sortBy string
	cmd := &cobra.Command{
		Use:   "top [--sort session|depth|age|unknown]",
		Short: "A live view of every session's queue",
		Long: `Top shows every session on a full-screen terminal view, updated as the store
changes (change notifications: fsnotify on bbolt, pub/sub on Redis) and every
5 seconds for the ages: state, depth, age of the oldest queued admission,
the running admission and how long it has run, unknown admissions, the
drain lease holder and live viewers; below, each producer's outbox:
pending events, those waiting after a refusal of the store (with the
oldest one's age and the last reason), rejected, delivered and dropped.

Keys: up/down (k/j) select a session; enter opens its queue (esc goes
back); s cycles the sort order, or d depth, a oldest age, u unknown,
n name; r reads the store now; q or ctrl-c quits and restores the terminal.

Top needs a terminal; without one it exits 2.`,
		Args:              cobra.NoArgs,
		ValidArgsFunction: cobra.NoFileCompletions,
		RunE: func(cmd *cobra.Command, _ []string) error {
			check := func() error {
				if !slices.Contains(topSorts, sortBy) {
					return backend.Errorf(backend.ErrInvalid, "top --sort %q: want session, depth, age or unknown", sortBy)
				}
				if !f.IO.IsStdoutTTY() {
					return backend.Errorf(backend.ErrInvalid, "top needs a terminal (use 'hermesq stats' in scripts)")
				}
				return nil
			}
			return storeRun(f, check, func(_ *printer, st backend.Store, _ *Config) error {
				ctx, cancel := context.WithCancel(cmd.Context())
				defer cancel()
				changes, err := st.Subscribe(ctx)
				if err != nil {
					return err
				}
				m := &topModel{svc: &admission.Service{Store: st, Now: f.Now}, ctx: ctx, changes: changes, sort: sortBy,
					producers: f.producerStats}
				p := tea.NewProgram(m, tea.WithAltScreen(), tea.WithInput(f.IO.In), tea.WithOutput(f.IO.Out), tea.WithContext(ctx))
				final, err := p.Run()
				if err != nil {
					return fmt.Errorf("top: %w", err)
				}
				if fm, ok := final.(*topModel); ok && fm.err != nil {
					return fm.err
				}
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&sortBy, "sort", "session", "sort by session, depth, age or unknown")
	_ = cmd.RegisterFlagCompletionFunc("sort", fixedCompletion(topSorts...))
	return cmd
}

// topModel is top's state: the latest figures, the selection, and the
// session whose queue is open ("" for the list).
type topModel struct {
	svc     *admission.Service
	ctx     context.Context
	changes <-chan string
	// producers reads the producers' outboxes (nil: none shown).
	producers func(context.Context) ([]producerStat, error)

	stats  admission.Stats
	prods  []producerStat
	prodEr error
	queue  []backend.Admission
	sort   string
	cursor int
	open   string
	width  int
	height int
	err    error
}

type (
	topStatsMsg struct {
		stats admission.Stats
		queue []backend.Admission
		err   error
		// The producers' figures; an error reading them is shown, not
		// fatal.
		prods   []producerStat
		prodErr error
	}
	topChangeMsg struct{ closed bool }
	topTickMsg   struct{}
)

func (m *topModel) Init() tea.Cmd {
	return tea.Batch(m.read(), m.waitChange(), m.tick())
}

// read loads the figures (and the open session's queue) off the UI loop.
func (m *topModel) read() tea.Cmd {
	open := m.open
	return func() tea.Msg {
		st, err := m.svc.Stats(m.ctx)
		var q []backend.Admission
		if err == nil && open != "" {
			q, err = m.svc.Store.ListAdmissions(m.ctx, open, backend.AdmissionFilter{
				Statuses: []backend.Status{backend.StatusQueued, backend.StatusRunning, backend.StatusUnknown}})
			if backend.CodeOf(err) == backend.CodeNotFound {
				err = nil
			}
		}
		msg := topStatsMsg{stats: st, queue: q, err: err}
		if m.producers != nil {
			msg.prods, msg.prodErr = m.producers(m.ctx)
		}
		return msg
	}
}

// waitChange waits for the next change notification; changes that arrive
// together are read once.
func (m *topModel) waitChange() tea.Cmd {
	return func() tea.Msg {
		_, ok := <-m.changes
		if !ok {
			return topChangeMsg{closed: true}
		}
		for {
			select {
			case _, ok := <-m.changes:
				if !ok {
					return topChangeMsg{}
				}
			case <-time.After(50 * time.Millisecond):
				return topChangeMsg{}
			}
		}
	}
}

func (m *topModel) tick() tea.Cmd {
	return tea.Tick(topRefresh, func(time.Time) tea.Msg { return topTickMsg{} })
}

func (m *topModel) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.width, m.height = msg.Width, msg.Height
	case topStatsMsg:
		if msg.err != nil {
			m.err = msg.err
			return m, tea.Quit
		}
		m.stats, m.queue = msg.stats, msg.queue
		m.prods, m.prodEr = msg.prods, msg.prodErr
		m.sortSessions()
		if m.cursor >= len(m.stats.Sessions) {
			m.cursor = max(len(m.stats.Sessions)-1, 0)
		}
	case topChangeMsg:
		if msg.closed {
			return m, nil
		}
		return m, tea.Batch(m.read(), m.waitChange())
	case topTickMsg:
		return m, tea.Batch(m.read(), m.tick())
	case tea.KeyMsg:
		return m.key(msg)
	}
	return m, nil
}

func (m *topModel) key(k tea.KeyMsg) (tea.Model, tea.Cmd) {
	switch k.String() {
	case "q", "ctrl+c":
		return m, tea.Quit
	case "up", "k":
		if m.open == "" && m.cursor > 0 {
			m.cursor--
		}
	case "down", "j":
		if m.open == "" && m.cursor < len(m.stats.Sessions)-1 {
			m.cursor++
		}
	case "enter":
		if m.open == "" && m.cursor < len(m.stats.Sessions) {
			m.open, m.queue = m.stats.Sessions[m.cursor].Session, nil
			return m, m.read()
		}
	case "esc", "backspace", "left", "h":
		m.open, m.queue = "", nil
	case "s":
		for i, s := range topSorts {
			if s == m.sort {
				m.sort = topSorts[(i+1)%len(topSorts)]
				break
			}
		}
		m.sortSessions()
	case "d", "a", "u", "n":
		m.sort = map[string]string{"d": "depth", "a": "age", "u": "unknown", "n": "session"}[k.String()]
		m.sortSessions()
	case "r":
		return m, m.read()
	}
	return m, nil
}

func (m *topModel) sortSessions() {
	ss := m.stats.Sessions
	sort.SliceStable(ss, func(i, j int) bool {
		a, b := ss[i], ss[j]
		switch m.sort {
		case "depth":
			if a.Depth != b.Depth {
				return a.Depth > b.Depth
			}
		case "age":
			if a.OldestQueuedAge != b.OldestQueuedAge {
				return a.OldestQueuedAge > b.OldestQueuedAge
			}
		case "unknown":
			if a.Unknown != b.Unknown {
				return a.Unknown > b.Unknown
			}
		}
		return a.Session < b.Session
	})
}

func (m *topModel) View() string {
	var b strings.Builder
	t := m.stats.Total
	fmt.Fprintf(&b, "hermesq top — %d sessions, depth %d, running %d, unknown %d, viewers %d   %s\n",
		len(m.stats.Sessions), t.Depth, t.Running, t.Unknown, t.Viewers, m.stats.At.Format("15:04:05"))
	if m.open != "" {
		fmt.Fprintf(&b, "queue of %s (esc: back, q: quit)\n\n", m.open)
		rows := [][]string{}
		for _, a := range m.queue {
			age := "-"
			switch a.Status {
			case backend.StatusQueued:
				age = termtext.Age(m.stats.At.Sub(a.AdmittedAt), true)
			case backend.StatusRunning, backend.StatusUnknown:
				age = termtext.Age(m.stats.At.Sub(a.StartedAt), true)
			}
			rows = append(rows, []string{strconv.FormatUint(a.Seq, 10), a.ID, string(a.Kind), string(a.Status), age, termtext.Cell(a.Text(), 40)})
		}
		if len(rows) == 0 {
			b.WriteString("(nothing queued, running or unknown)\n")
		} else {
			_ = termtext.Table(&b, []string{"SEQ", "ID", "KIND", "STATUS", "AGE", "TEXT"}, rows)
		}
		return b.String()
	}
	fmt.Fprintf(&b, "sort: %s   keys: ↑/↓ select  enter queue  s sort  r refresh  q quit\n\n", m.sort)
	rows := [][]string{}
	for i, q := range m.stats.Sessions {
		mark := " "
		if i == m.cursor {
			mark = ">"
		}
		running := "-"
		if q.RunningID != "" {
			running = q.RunningID[:min(8, len(q.RunningID))] + " " + termtext.Age(q.RunningAge, true)
		}
		rows = append(rows, []string{mark, q.Session, q.State, strconv.Itoa(q.Depth), termtext.Age(q.OldestQueuedAge, q.Depth > 0),
			running, strconv.Itoa(q.Unknown), termtext.OrDash(q.LeaseHolder), strconv.Itoa(q.Viewers)})
	}
	_ = termtext.Table(&b, []string{" ", "SESSION", "STATE", "DEPTH", "OLDEST", "RUNNING", "UNKNOWN", "LEASE", "VIEWERS"}, rows)
	switch {
	case m.prodEr != nil:
		fmt.Fprintf(&b, "\nproducers: %s\n", termtext.OneLine(m.prodEr.Error()))
	case len(m.prods) > 0:
		b.WriteString("\n")
		_ = producerTable(&b, m.prods)
	}
	return b.String()
}
