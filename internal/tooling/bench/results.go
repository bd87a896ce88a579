package bench

import "time"

// Operator names in the results.
const (
	Ours     = "ours"
	Baseline = "baseline"
)

// Setting names: each operator at its own defaults, or both at the same
// number of workers.
const (
	Defaults = "defaults"
	Equal    = "equal concurrency"
)

// Results is everything one `make bench` measured; it is written as JSON.
type Results struct {
	Started time.Time `json:"started"`
	Host    Host      `json:"host"`
	// Ns and Rounds are what was run.
	Ns     []int `json:"ns"`
	Rounds int   `json:"rounds"`
	// DefaultWorkers is each operator's --max-concurrent-reconciles default.
	DefaultWorkers map[string]int `json:"defaultWorkers"`
	// EqualWorkers is the concurrency of the equal-concurrency setting (the
	// baseline's default, at which ours runs again). When both defaults are
	// already equal, that setting is the defaults run and EqualIsDefaults
	// says so.
	EqualWorkers    int  `json:"equalWorkers"`
	EqualIsDefaults bool `json:"equalIsDefaults"`

	Runs   []OperatorRun `json:"runs"`
	Floors []Floor       `json:"floors"`
	// Seconds is the wall time of the whole benchmark.
	Seconds float64 `json:"seconds"`
}

// Host describes the machine.
type Host struct {
	CPUs      int    `json:"cpus"`
	GoVersion string `json:"goVersion"`
	LoadAvg   string `json:"loadAvgAtStart"`
}

// OperatorRun is one operator on one fresh control plane with N resources.
type OperatorRun struct {
	Operator string `json:"operator"`
	Setting  string `json:"setting"`
	Workers  int    `json:"workers"`
	N        int    `json:"n"`
	Round    int    `json:"round"`

	// AllDeployedSeconds and AllReadySeconds run from the first create to
	// the last resource's first Deployed=True (Ready=True); AllReady is 0
	// for an operator without a Ready condition.
	AllDeployedSeconds float64 `json:"allDeployedSeconds"`
	AllReadySeconds    float64 `json:"allReadySeconds,omitempty"`
	// QuietSeconds runs from the first create to the operator's last request
	// of the install: the work it still does after all are Deployed (e.g.
	// reconciles its own status writes started) shows as the difference.
	QuietSeconds float64 `json:"quietSeconds"`
	// Install counts the operator's requests from the first create until it
	// fell quiet.
	Install Tally `json:"install"`
	// InstallCost is what the same window cost in CPU and allocation.
	InstallCost Cost `json:"installCost"`
	// Unsettled names the phases after which the operator had not fallen
	// quiet within the limit, so their counts may be short.
	Unsettled []string `json:"unsettled,omitempty"`
	// RSS in bytes: idle (started, watching and quiet, before the first
	// resource), settled after the installs, and after the unrelated Secrets
	// were created.
	RSSIdle         int64 `json:"rssIdleBytes"`
	RSSSettled      int64 `json:"rssSettledBytes"`
	RSSAfterSecrets int64 `json:"rssAfterSecretsBytes"`
	// RSSAnonSettled is the anonymous part of RSSSettled (RssAnon).
	RSSAnonSettled   int64 `json:"rssAnonSettledBytes"`
	UnrelatedSecrets int   `json:"unrelatedSecrets"`
	// LatencySeconds are the spec-change-to-status times, in order.
	LatencySeconds []float64 `json:"latencySeconds"`
	// NoOp counts the operator's requests for one reconcile of every settled
	// resource (triggered by an annotation change).
	NoOp Tally `json:"noOp"`
	// Restarted is the restart and steady-state phases (restart.go), run
	// at each operator's defaults only.
	Restarted *RestartRun `json:"restarted,omitempty"`
}

// Floor is the same writes per resource as an ideal operator, issued by a
// plain client on a fresh control plane.
type Floor struct {
	N           int     `json:"n"`
	Round       int     `json:"round"`
	Workers     int     `json:"workers"`
	Seconds     float64 `json:"seconds"`
	Writes      int     `json:"writes"`
	WritesPerCR int     `json:"writesPerResource"`
	// Cost is what the writes cost; the operator is the benchmark's client.
	Cost Cost `json:"cost"`
}
