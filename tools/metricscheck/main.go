package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"os"
	"regexp"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/storage"
	"sigs.k8s.io/yaml"
)

func main() {
	tokenFile := flag.String("token-file", "", "file with the bearer token to scrape with")
	rulesFile := flag.String("rules", "", "PrometheusRule manifest")
	dashboardFile := flag.String("dashboard", "", "Grafana dashboard JSON")
	interval := flag.Duration("interval", 5*time.Second, "time between the two scrapes of each URL, so that rate() has two samples")
	flag.Parse()
	if err := run(*tokenFile, *rulesFile, *dashboardFile, *interval, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(tokenFile, rulesFile, dashboardFile string, interval time.Duration, urls []string) error {
	token, err := os.ReadFile(tokenFile)
	if err != nil {
		return err
	}
	queries, err := dashboardQueries(dashboardFile)
	if err != nil {
		return err
	}
	rules, err := ruleQueries(rulesFile)
	if err != nil {
		return err
	}
	db := newStore()
	var at time.Time
	for i := range 2 {
		if i > 0 {
			time.Sleep(interval)
		}
		at = time.Now()
		for _, url := range urls {
			n, err := scrape(db, url, strings.TrimSpace(string(token)), at)
			if err != nil {
				return err
			}
			fmt.Printf("scraped %d samples from %s\n", n, url)
		}
	}
	var failed []error
	for _, q := range append(queries, rules...) {
		if err := check(db, q, at); err != nil {
			failed = append(failed, fmt.Errorf("%s: %w", q.where, err))
			continue
		}
		fmt.Printf("ok   %s\n", q.where)
	}
	return errors.Join(failed...)
}

// query is an expression and where it was found.
type query struct{ where, expr string }

// grafanaVariables are replaced as Grafana would before a query runs: every
// value of a template variable, and ranges long enough for two scrapes.
var grafanaVariables = strings.NewReplacer(
	"$__rate_interval", "5m", "$__interval", "1m", "$__range", "1h",
	"$namespace", ".*", "$name", ".*", "${namespace}", ".*", "${name}", ".*",
)

// labelValues is Grafana's label_values(selector, label) of a variable.
var labelValues = regexp.MustCompile(`^label_values\((.*),\s*\w+\)$`)

func dashboardQueries(path string) ([]query, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var d struct {
		Panels     []panel `json:"panels"`
		Templating struct {
			List []struct {
				Name  string `json:"name"`
				Type  string `json:"type"`
				Query any    `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(data, &d); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var out []query
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		q, _ := v.Query.(map[string]any)
		text, _ := q["query"].(string)
		m := labelValues.FindStringSubmatch(text)
		if m == nil {
			return nil, fmt.Errorf("variable %s: %q is not label_values(selector, label)", v.Name, text)
		}
		out = append(out, query{where: "dashboard variable " + v.Name, expr: grafanaVariables.Replace(m[1])})
	}
	var walk func([]panel)
	walk = func(panels []panel) {
		for _, p := range panels {
			for _, t := range p.Targets {
				out = append(out, query{where: fmt.Sprintf("panel %q query %s", p.Title, t.RefID), expr: grafanaVariables.Replace(t.Expr)})
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	if len(out) == 0 {
		return nil, fmt.Errorf("%s has no queries", path)
	}
	return out, nil
}

type panel struct {
	Title   string `json:"title"`
	Targets []struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	} `json:"targets"`
	Panels []panel `json:"panels"`
}

// ruleQueries reads the rule groups of a PrometheusRule and validates them
// as Prometheus does when it loads a rule file.
func ruleQueries(path string) ([]query, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var pr struct {
		Spec json.RawMessage `json:"spec"`
	}
	if err := yaml.Unmarshal(data, &pr); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	groupsYAML, err := yaml.JSONToYAML(pr.Spec)
	if err != nil {
		return nil, err
	}
	groups, errs := rulefmt.Parse(groupsYAML, false, model.UTF8Validation, parser.NewParser(parser.Options{}), slog.New(slog.DiscardHandler))
	if len(errs) > 0 {
		return nil, fmt.Errorf("%s: %w", path, errors.Join(errs...))
	}
	var out []query
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			name := "alert " + r.Alert
			if r.Record != "" {
				name = "record " + r.Record
			}
			if r.Alert != "" && (r.Labels["severity"] == "" || r.Annotations["summary"] == "" || r.Annotations["description"] == "") {
				return nil, fmt.Errorf("%s: give it a severity label and summary and description annotations", name)
			}
			out = append(out, query{where: name, expr: r.Expr})
		}
	}
	return out, nil
}

// scrape reads the metrics at url and appends them to db at time at.
func scrape(db *store, url, token string, at time.Time) (int, error) {
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		// The binaries serve a certificate they made themselves, as the
		// PodMonitor accepts.
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // see above
	}}
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		return 0, fmt.Errorf("scrape %s: %s: %s", url, resp.Status, body)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return 0, fmt.Errorf("scrape %s: %w", url, err)
	}
	n := 0
	add := func(name string, m *dto.Metric, v float64, extra ...string) {
		b := labels.NewBuilder(labels.EmptyLabels())
		b.Set(model.MetricNameLabel, name)
		b.Set("instance", url)
		for _, l := range m.GetLabel() {
			b.Set(l.GetName(), l.GetValue())
		}
		for i := 0; i+1 < len(extra); i += 2 {
			b.Set(extra[i], extra[i+1])
		}
		n++
		db.add(b.Labels(), at.UnixMilli(), v)
	}
	for name, f := range families {
		for _, m := range f.GetMetric() {
			switch f.GetType() {
			case dto.MetricType_COUNTER:
				add(name, m, m.GetCounter().GetValue())
			case dto.MetricType_GAUGE:
				add(name, m, m.GetGauge().GetValue())
			case dto.MetricType_UNTYPED:
				add(name, m, m.GetUntyped().GetValue())
			case dto.MetricType_HISTOGRAM:
				h := m.GetHistogram()
				for _, b := range h.GetBucket() {
					add(name+"_bucket", m, float64(b.GetCumulativeCount()), "le", formatLe(b.GetUpperBound()))
				}
				add(name+"_bucket", m, float64(h.GetSampleCount()), "le", "+Inf")
				add(name+"_sum", m, h.GetSampleSum())
				add(name+"_count", m, float64(h.GetSampleCount()))
			case dto.MetricType_SUMMARY:
				s := m.GetSummary()
				for _, q := range s.GetQuantile() {
					add(name, m, q.GetValue(), "quantile", fmt.Sprint(q.GetQuantile()))
				}
				add(name+"_sum", m, s.GetSampleSum())
				add(name+"_count", m, float64(s.GetSampleCount()))
			}
		}
	}
	return n, nil
}

func formatLe(v float64) string {
	if math.IsInf(v, 1) {
		return "+Inf"
	}
	return model.SampleValue(v).String()
}

var engine = promql.NewEngine(promql.EngineOpts{
	Logger: slog.New(slog.DiscardHandler), MaxSamples: 1e7, Timeout: time.Minute, LookbackDelta: 5 * time.Minute,
})

// check parses q, makes sure each of its selectors reads what the scrape
// has (see store.missing), and evaluates it at time at.
func check(db *store, q query, at time.Time) error {
	expr, err := parser.NewParser(parser.Options{}).ParseExpr(q.expr)
	if err != nil {
		return fmt.Errorf("%q does not parse: %w", q.expr, err)
	}
	var missing []string
	parser.Inspect(expr, func(node parser.Node, _ []parser.Node) error {
		if vs, ok := node.(*parser.VectorSelector); ok {
			missing = append(missing, db.missing(vs.LabelMatchers)...)
		}
		return nil
	})
	if len(missing) > 0 {
		return fmt.Errorf("%q: not in the scrape: %s", q.expr, strings.Join(missing, ", "))
	}
	n, err := evaluate(db, q.expr, at)
	if err != nil {
		return fmt.Errorf("%q: %w", q.expr, err)
	}
	fmt.Printf("     %s: %d series\n", q.expr, n)
	return nil
}

// evaluate runs an instant query and says how many series it returned.
func evaluate(db storage.Queryable, expr string, at time.Time) (int, error) {
	qry, err := engine.NewInstantQuery(context.Background(), db, nil, expr, at)
	if err != nil {
		return 0, err
	}
	defer qry.Close()
	res := qry.Exec(context.Background())
	if res.Err != nil {
		return 0, res.Err
	}
	switch v := res.Value.(type) {
	case promql.Vector:
		return len(v), nil
	case promql.Matrix:
		return len(v), nil
	case promql.Scalar:
		return 1, nil
	}
	return 0, fmt.Errorf("unexpected result %T", res.Value)
}
