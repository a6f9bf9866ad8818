package main

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"sync"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/prometheus/prometheus/tsdb/chunks"
	"github.com/prometheus/prometheus/util/annotations"
)

// store holds scraped float samples in memory and serves them to the PromQL
// engine: the few thousand samples of two scrapes need no TSDB (whose
// package would bring every remote-storage SDK along).
type store struct {
	mu     sync.Mutex
	series map[string]*memSeries
}

type memSeries struct {
	lset    labels.Labels
	samples []chunks.Sample
}

func newStore() *store { return &store{series: map[string]*memSeries{}} }

// add appends a sample; samples of one series come in time order.
func (s *store) add(lset labels.Labels, t int64, v float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := lset.String()
	m := s.series[key]
	if m == nil {
		m = &memSeries{lset: lset}
		s.series[key] = m
	}
	m.samples = append(m.samples, floatSample{t: t, f: v})
}

// missing says what a selector's matchers read that no series has: the
// metric, a label of the metric, or the value of an equality matcher.
func (s *store) missing(matchers []*labels.Matcher) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var name string
	for _, m := range matchers {
		if m.Name == model.MetricNameLabel && m.Type == labels.MatchEqual {
			name = m.Value
		}
	}
	var of []labels.Labels
	for _, m := range s.series {
		if name == "" || m.lset.Get(model.MetricNameLabel) == name {
			of = append(of, m.lset)
		}
	}
	if len(of) == 0 {
		return []string{"metric " + name}
	}
	var out []string
	for _, m := range matchers {
		if m.Name == model.MetricNameLabel {
			continue
		}
		has, hasValue := false, false
		for _, l := range of {
			has = has || l.Has(m.Name)
			hasValue = hasValue || l.Get(m.Name) == m.Value
		}
		switch {
		case !has:
			out = append(out, fmt.Sprintf("label %s of %s", m.Name, name))
		case m.Type == labels.MatchEqual && !hasValue:
			out = append(out, fmt.Sprintf("%s of %s", m, name))
		}
	}
	return out
}

func (s *store) Querier(_, _ int64) (storage.Querier, error) { return querier{s}, nil }

type querier struct{ s *store }

func (q querier) Select(_ context.Context, _ bool, _ *storage.SelectHints, matchers ...*labels.Matcher) storage.SeriesSet {
	q.s.mu.Lock()
	defer q.s.mu.Unlock()
	var out []storage.Series
	for _, m := range q.s.series {
		if matches(m.lset, matchers) {
			out = append(out, storage.NewListSeries(m.lset, slices.Clone(m.samples)))
		}
	}
	sort.Slice(out, func(i, j int) bool { return labels.Compare(out[i].Labels(), out[j].Labels()) < 0 })
	return &seriesSet{series: out, i: -1}
}

func matches(lset labels.Labels, matchers []*labels.Matcher) bool {
	for _, m := range matchers {
		if !m.Matches(lset.Get(m.Name)) {
			return false
		}
	}
	return true
}

func (q querier) LabelValues(_ context.Context, name string, _ *storage.LabelHints, matchers ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	q.s.mu.Lock()
	defer q.s.mu.Unlock()
	var values []string
	for _, m := range q.s.series {
		if v := m.lset.Get(name); v != "" && matches(m.lset, matchers) && !slices.Contains(values, v) {
			values = append(values, v)
		}
	}
	slices.Sort(values)
	return values, nil, nil
}

func (q querier) LabelNames(_ context.Context, _ *storage.LabelHints, matchers ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	q.s.mu.Lock()
	defer q.s.mu.Unlock()
	var names []string
	for _, m := range q.s.series {
		if matches(m.lset, matchers) {
			m.lset.Range(func(l labels.Label) {
				if !slices.Contains(names, l.Name) {
					names = append(names, l.Name)
				}
			})
		}
	}
	slices.Sort(names)
	return names, nil, nil
}

func (querier) Close() error { return nil }

type seriesSet struct {
	series []storage.Series
	i      int
}

func (s *seriesSet) Next() bool                      { s.i++; return s.i < len(s.series) }
func (s *seriesSet) At() storage.Series              { return s.series[s.i] }
func (*seriesSet) Err() error                        { return nil }
func (*seriesSet) Warnings() annotations.Annotations { return nil }

// floatSample is a float sample without a start time.
type floatSample struct {
	t int64
	f float64
}

func (s floatSample) T() int64                    { return s.t }
func (floatSample) ST() int64                     { return 0 }
func (s floatSample) F() float64                  { return s.f }
func (floatSample) H() *histogram.Histogram       { return nil }
func (floatSample) FH() *histogram.FloatHistogram { return nil }
func (floatSample) Type() chunkenc.ValueType      { return chunkenc.ValFloat }
func (s floatSample) Copy() chunks.Sample         { return s }
