package inspect

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/rotaworks/rota/bridge"
	"github.com/rotaworks/rota/dispatch"
	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/internal/clock"
	"github.com/rotaworks/rota/maintenance"
)

// defaultHistory is the number of cycle reports and poll reports an Inspector keeps when
// Config.History is zero.
const defaultHistory = 60

// The bounds of Config and of the pages' query parameters.
const (
	// maxHistory is the largest Config.History.
	maxHistory = 10_000
	// defaultPage is the length of a list whose request has no ?limit=.
	defaultPage = 50
	// maxPage is the largest ?limit= a list takes.
	maxPage = 500
	// maxLaneDepth is how deep in turn order the lane page reads: ?after= plus ?limit=
	// may not exceed it, since a lane is read from its first user on each request.
	maxLaneDepth = 5_000
)

// ErrInvalidConfig is returned by New when the Config cannot work; the wrapping error names
// the field and its value, every problem joined.
var ErrInvalidConfig = errors.New("inspect: invalid config")

// Config configures an Inspector. Index and Lanes are required; the zero value of every
// other field means its default.
type Config struct {
	// Index is the index the pages read and the due-now action writes.
	Index duework.Index
	// Lanes are the dispatch lanes, highest priority first, as the Dispatcher has them.
	Lanes []dispatch.LaneCapacity
	// Dispatcher re-routes tenants for the reroute action, and its MaxClockSkew bounds
	// the due-now action (see the package doc). Required when Actions is set.
	Dispatcher *dispatch.Dispatcher
	// StateStore, when not nil, is where the maintenance page reads every task's state
	// and the gauge; nil shows only what the polls reported.
	StateStore maintenance.StateStore
	// Clock is where the pages read now; nil means the real clock.
	Clock interface{ Now() time.Time }
	// Logger receives one line per action; nil means slog.Default() at the time New is
	// called.
	Logger *slog.Logger
	// History is how many cycle reports, and how many poll reports, the Inspector keeps
	// (60 when zero), at most 10,000.
	History int
	// Actions turns on the POST actions (due-now, reroute, pause and resume) and the
	// pages' forms for them. Off, the default, the Inspector is read-only and every action
	// is refused with 403.
	Actions bool
	// AlarmAfterErrors is the ErrorStreak at which the Inspector counts a source as
	// failing: the overview lists it and the tenant page marks its entry. Set it to the
	// Runner's RunnerConfig.AlarmAfterErrors, so that the pages agree with the Runner's
	// "rota: source failing" lines. Zero means bridge.DefaultAlarmAfterErrors (5); a
	// negative value turns failing sources off.
	AlarmAfterErrors int
}

// withDefaults returns c with its zero fields set to their defaults.
func (c Config) withDefaults() Config {
	if c.Clock == nil {
		c.Clock = clock.Real
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.History == 0 {
		c.History = defaultHistory
	}
	if c.AlarmAfterErrors == 0 {
		c.AlarmAfterErrors = bridge.DefaultAlarmAfterErrors
	}
	return c
}

// validate reports every rule c breaks, joined.
func (c Config) validate() error {
	var errs []error
	bad := func(field, must string, got any) {
		errs = append(errs, fmt.Errorf("%w: Config.%s must %s, got %v", ErrInvalidConfig, field, must, got))
	}
	if c.Index == nil {
		bad("Index", "not be nil", "nil")
	}
	if len(c.Lanes) == 0 {
		bad("Lanes", "hold at least one lane", "none")
	}
	seen := map[dispatch.Lane]int{}
	for i, lc := range c.Lanes {
		if j, dup := seen[lc.Lane]; dup {
			bad(fmt.Sprintf("Lanes[%d].Lane", i), fmt.Sprintf("differ from Lanes[%d].Lane", j), fmt.Sprintf("%q", lc.Lane))
		} else if lc.Lane == "" {
			bad(fmt.Sprintf("Lanes[%d].Lane", i), "not be empty", `""`)
		}
		seen[lc.Lane] = i
	}
	if c.Actions && c.Dispatcher == nil {
		bad("Dispatcher", "not be nil when Actions is set", "nil")
	}
	if c.History < 0 || c.History > maxHistory {
		bad("History", fmt.Sprintf("be in [0, %d] (0: defaultHistory)", maxHistory), c.History)
	}
	return errors.Join(errs...)
}

// Inspector serves the operator's pages and their JSON (see the package doc), and keeps the
// reports it is told about: it is an http.Handler, a dispatch.Observer, a bridge.Observer
// and a maintenance.Observer. Mount it behind the host's own authentication. It is safe for
// concurrent use.
type Inspector struct {
	idx       duework.Index
	lanes     []dispatch.LaneCapacity
	d         *dispatch.Dispatcher
	store     maintenance.StateStore
	clock     interface{ Now() time.Time }
	log       *slog.Logger
	actions   bool
	alarmErrs int // Config.AlarmAfterErrors, negative when off
	handler   http.Handler

	mu      sync.Mutex
	cycles  ring[cycleRecord]
	polls   ring[pollRecord]
	noisy   episodes[dispatch.Lane, alarmRecord] // raised noisy-neighbour alarms
	late    episodes[string, lateRecord]         // raised late-work alarms, by tenant
	failing episodes[sourceKey, failingRecord]   // failing sources
	// failExpiry is no later than the earliest forgetAt of the failing sources; zero when
	// there are none.
	failExpiry time.Time
	alarmLog   ring[alarmEvent]
}

var (
	_ http.Handler         = (*Inspector)(nil)
	_ dispatch.Observer    = (*Inspector)(nil)
	_ bridge.Observer      = (*Inspector)(nil)
	_ maintenance.Observer = (*Inspector)(nil)
)

// New returns an Inspector over cfg.Index, or an error wrapping ErrInvalidConfig that
// names every bad field: a nil Index, no Lanes (or an empty or repeated lane), Actions
// without a Dispatcher, a History out of range. New copies cfg.Lanes.
func New(cfg Config) (*Inspector, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	i := &Inspector{
		idx:       cfg.Index,
		lanes:     slices.Clone(cfg.Lanes),
		d:         cfg.Dispatcher,
		store:     cfg.StateStore,
		clock:     cfg.Clock,
		log:       cfg.Logger,
		actions:   cfg.Actions,
		alarmErrs: cfg.AlarmAfterErrors,
		cycles:    newRing[cycleRecord](cfg.History),
		polls:     newRing[pollRecord](cfg.History),
		noisy:     newEpisodes[dispatch.Lane, alarmRecord](maxLateTracked),
		late:      newEpisodes[string, lateRecord](maxLateTracked),
		failing:   newEpisodes[sourceKey, failingRecord](maxLateTracked),
		alarmLog:  newRing[alarmEvent](alarmLogSize),
	}
	i.handler = i.routes()
	return i, nil
}

// ServeHTTP serves the pages, their JSON and the actions.
func (i *Inspector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	i.handler.ServeHTTP(w, r)
}

// laneIndex returns the position of lane in the Config's lanes, or -1.
func (i *Inspector) laneIndex(lane string) int {
	return slices.IndexFunc(i.lanes, func(lc dispatch.LaneCapacity) bool { return string(lc.Lane) == lane })
}
