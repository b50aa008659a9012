package helmchart

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	chart "helm.sh/helm/v4/pkg/chart/v2"
)

// metaSchemas are the JSON Schema drafts the validator knows without
// loading anything.
var metaSchemas = []string{
	"json-schema.org/draft-04/schema", "json-schema.org/draft-06/schema", "json-schema.org/draft-07/schema",
	"json-schema.org/draft/2019-09/schema", "json-schema.org/draft/2020-12/schema",
}

// checkSchemas refuses a values.schema.json (the chart's or a subchart's)
// that would make Helm's validator load another document: a reference
// that is not a fragment of the same schema ("#/…") would be fetched over
// HTTP or read from any local file, outside what the source digest binds.
func checkSchemas(ch *chart.Chart, dir string) error {
	if len(ch.Schema) > 0 {
		var doc any
		if err := json.Unmarshal(ch.Schema, &doc); err != nil {
			return fmt.Errorf("%s/values.schema.json: %w", dir, err)
		}
		if err := localRefs(doc); err != nil {
			return fmt.Errorf("%s/values.schema.json: %w; a locked release validates values against the chart's own files only", dir, err)
		}
	}
	for _, sub := range ch.Dependencies() {
		if err := checkSchemas(sub, dir+"/charts/"+sub.Name()); err != nil {
			return err
		}
	}
	return nil
}

func localRefs(v any) error {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			s, isString := e.(string)
			switch {
			case (k == "$ref" || k == "$dynamicRef" || k == "$recursiveRef") && isString && !strings.HasPrefix(s, "#"):
				return fmt.Errorf("%s %q refers to another document", k, s)
			case k == "$schema" && isString && !knownMetaSchema(s):
				return fmt.Errorf("$schema %q is not a JSON Schema draft the validator knows", s)
			case k == "$id" && isString && s != "":
				return fmt.Errorf("$id %q would resolve references against another document", s)
			}
			if err := localRefs(e); err != nil {
				return err
			}
		}
	case []any:
		for _, e := range x {
			if err := localRefs(e); err != nil {
				return err
			}
		}
	}
	return nil
}

func knownMetaSchema(s string) bool {
	s = strings.TrimSuffix(strings.TrimPrefix(strings.TrimPrefix(s, "https://"), "http://"), "#")
	return slices.Contains(metaSchemas, s)
}
