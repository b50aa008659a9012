package fleetfile

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"unicode/utf8"

	yamlv3 "go.yaml.in/yaml/v3"
	"sigs.k8s.io/yaml"
)

// plainInteger is how an integer member is written: plain decimal digits,
// no sign, no leading zero (YAML would read 010 as 8 and 0x10 as 16).
var plainInteger = regexp.MustCompile(`^(0|[1-9][0-9]*)$`)

// integerMember matches the paths of the integer members.
var integerMember = regexp.MustCompile(`^waves\[[0-9]+\]\.(maxParallel|maxFailures)$`)

// readYAML reads the fleet file's bytes into the JSON value it stands for
// (numbers as json.Number), after the YAML rules of docs/fleet.md §1: at
// most MaxFileBytes of UTF-8, one document, no duplicate key, no anchor,
// alias, explicit tag or merge key, integers in plain decimal digits.
func readYAML(c *checker, data []byte) (any, bool) {
	switch {
	case len(data) > MaxFileBytes:
		c.add("", fmt.Sprintf("the file is %d bytes, at most %d are allowed", len(data), MaxFileBytes))
		return nil, false
	case !utf8.Valid(data):
		c.add("", "the file is not UTF-8")
		return nil, false
	}
	js, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		c.add("", "not valid YAML: "+oneLine(err.Error()))
		return nil, false
	}
	dec := yamlv3.NewDecoder(bytes.NewReader(data))
	var docs []*yamlv3.Node
	for {
		var doc yamlv3.Node
		if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			c.add("", "not valid YAML: "+oneLine(err.Error()))
			return nil, false
		}
		docs = append(docs, &doc)
	}
	if len(docs) != 1 {
		c.add("", fmt.Sprintf("want one YAML document, got %d", len(docs)))
		return nil, false
	}
	plainYAML(c, docs[0], "")
	if len(c.problems) > 0 {
		return nil, false
	}
	jd := json.NewDecoder(bytes.NewReader(js))
	jd.UseNumber()
	var v any
	if err := jd.Decode(&v); err != nil {
		c.add("", "not valid YAML: "+err.Error())
		return nil, false
	}
	return v, true
}

// plainYAML walks a YAML node: no anchor, alias, explicit tag or merge key
// anywhere, and the integer members written in plain decimal digits.
func plainYAML(c *checker, n *yamlv3.Node, path string) {
	switch {
	case n.Kind == yamlv3.AliasNode || n.Anchor != "":
		c.add(path, "anchors and aliases are not allowed; write the value out")
		return
	case n.Style&yamlv3.TaggedStyle != 0:
		c.add(path, fmt.Sprintf("the explicit tag %s is not allowed; write the value plainly", n.Tag))
		return
	}
	switch n.Kind {
	case yamlv3.DocumentNode:
		for _, m := range n.Content {
			plainYAML(c, m, path)
		}
	case yamlv3.SequenceNode:
		for i, m := range n.Content {
			plainYAML(c, m, fmt.Sprintf("%s[%d]", path, i))
		}
	case yamlv3.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			if k.Tag == "!!merge" {
				c.add(path, "merge keys (<<) are not allowed; write the fields out")
				continue
			}
			plainYAML(c, k, path)
			plainYAML(c, n.Content[i+1], join(path, k.Value))
		}
	case yamlv3.ScalarNode:
		if n.Style == 0 && integerMember.MatchString(path) && !plainInteger.MatchString(n.Value) {
			c.add(path, fmt.Sprintf("%s is not an integer written in plain decimal digits", strconv.Quote(clip(n.Value))))
		}
	}
}

// oneLine joins a multi-line parser message into one line.
func oneLine(s string) string {
	return string(bytes.Join(bytes.Fields([]byte(s)), []byte(" ")))
}
