package main

import (
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
)

// A query fails on a metric, label or label value the scrape does not
// have; a selector waiting for a bad state passes while all is well.
func TestCheck(t *testing.T) {
	db := newStore()
	now := time.Now()
	for _, at := range []time.Time{now.Add(-5 * time.Second), now} {
		db.add(labels.FromStrings(model.MetricNameLabel, "hostedcp_control_plane_condition", "type", "Available", "status", "True", "reason", "Ready"), at.UnixMilli(), 1)
		db.add(labels.FromStrings(model.MetricNameLabel, "hostedcp_control_plane_condition", "type", "EtcdReady", "status", "False", "reason", "Progressing"), at.UnixMilli(), 1)
	}
	for expr, ok := range map[string]bool{
		`count by (reason) (hostedcp_control_plane_condition{type="Available"})`:            true,
		`hostedcp_control_plane_condition{type="Available", status!="True"} == 1`:           true,
		`hostedcp_control_plane_condition{type="Available", status="False"} == 1`:           true,
		`hostedcp_control_plane_condition{type="Availabel"}`:                                false,
		`hostedcp_control_plane_conditions`:                                                 false,
		`hostedcp_control_plane_condition{phase="EtcdReady"}`:                               false,
		`sum(rate(hostedcp_control_plane_condition[5m])) by (`:                              false,
		`histogram_quantile(0.9, sum by (le) (rate(hostedcp_control_plane_condition[5m])))`: true,
	} {
		err := check(db, query{where: "test", expr: expr}, now)
		if (err == nil) != ok {
			t.Errorf("%s: got %v, want ok=%v", expr, err, ok)
		}
	}
}
