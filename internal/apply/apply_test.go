package apply

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestContains(t *testing.T) {
	have := map[string]any{
		"metadata": map[string]any{"name": "x", "annotations": map[string]any{"a": "1", "b": "2"}},
		"spec": map[string]any{
			"replicas":   int64(2),
			"containers": []any{map[string]any{"name": "c", "image": "i", "terminationMessagePath": "/dev/termination-log"}, map[string]any{"name": "d"}},
			"args":       []any{"--a", "--b"},
		},
	}
	for name, tc := range map[string]struct {
		want any
		ok   bool
	}{
		"subset":                  {map[string]any{"metadata": map[string]any{"annotations": map[string]any{"a": "1"}}}, true},
		"defaults in list items":  {map[string]any{"spec": map[string]any{"containers": []any{map[string]any{"name": "c", "image": "i"}}}}, true},
		"later item only":         {map[string]any{"spec": map[string]any{"containers": []any{map[string]any{"name": "d"}}}}, true},
		"order matters":           {map[string]any{"spec": map[string]any{"args": []any{"--b", "--a"}}}, false},
		"changed scalar":          {map[string]any{"spec": map[string]any{"replicas": int64(3)}}, false},
		"missing field":           {map[string]any{"spec": map[string]any{"paused": true}}, false},
		"missing list item":       {map[string]any{"spec": map[string]any{"args": []any{"--a", "--c"}}}, false},
		"empty objects match all": {map[string]any{"spec": map[string]any{"resources": map[string]any{}}}, true},
	} {
		assert.Equal(t, tc.ok, Contains(have, tc.want), name)
	}
}
