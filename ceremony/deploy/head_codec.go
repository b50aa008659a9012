package deploy

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/qinglong/kubectl-ql3/inventory"
	"github.com/qinglong/kubectl-ql3/inventory/canon"
	"github.com/qinglong/kubectl-ql3/receipts"
)

// The Head's two stored forms (docs/head.md §2.1). A Head is one logical
// document, the v1 form, over which every digest is defined; a Head whose
// v1 text would be longer than HeadV1MaxBytes is stored in the v2 form,
// which holds the same inventory packed (canon.PackInventory), and a
// retire's retired list packed the same way beside its objects' states.
const (
	HeadSchemaV2           = "qinglong/deployment-head@v2"
	LabelHeadSchemaValueV2 = "deployment-head-v2"
	HeadV1MaxBytes         = 64 << 10
)

// headV2 is head.json in the v2 form: the logical Head with its schema and
// its current deployment replaced, and its retired list packed (the outer
// members win over the embedded Head's of the same name).
type headV2 struct {
	*Head
	Schema  string        `json:"schema"`
	Current headV2Current `json:"current"`
	// Retired shadows the logical Head's listed retired list: never
	// written in v2, and tamper when read.
	Retired       []receipts.Retired     `json:"retired,omitempty"`
	RetiredGroups []canon.InventoryGroup `json:"retiredGroups,omitempty"`
	RetiredStates []retiredState         `json:"retiredStates,omitempty"`
}

// retiredState is what a v2 Head keeps of a retired object besides its
// identity: [uid, resourceVersion, reviewedDigest, outcome], each a string
// (reviewedDigest "" where the logical Head omits it).
type retiredState [4]string

// UnmarshalJSON reads exactly an array of four strings.
func (s *retiredState) UnmarshalJSON(b []byte) error {
	var a []string
	if err := json.Unmarshal(b, &a); err != nil || len(a) != len(s) {
		return fmt.Errorf("a retired state must be [uid, resourceVersion, reviewedDigest, outcome], four strings: %s", b)
	}
	copy(s[:], a)
	return nil
}

// packRetired is rs in the v2 form: the identities packed as an inventory
// is, and each object's state in the same order. nil for no list.
func packRetired(rs []receipts.Retired) ([]canon.InventoryGroup, []retiredState) {
	if rs == nil {
		return nil, nil
	}
	ids := make([]inventory.Identity, len(rs))
	states := make([]retiredState, len(rs))
	for i, r := range rs {
		ids[i], states[i] = r.ID, retiredState{r.UID, r.ResourceVersion, r.ReviewedDigest, r.Outcome}
	}
	return canon.PackInventory(ids), states
}

// unpackRetired is the logical retired list of a v2 Head's packed one: nil
// when both members are absent; tamper when one is absent, or the states
// are not one per identity.
func unpackRetired(groups []canon.InventoryGroup, states []retiredState) ([]receipts.Retired, error) {
	if groups == nil && states == nil {
		return nil, nil
	}
	if groups == nil || states == nil {
		return nil, tamper("head.json: retiredGroups and retiredStates come together")
	}
	ids, err := canon.UnpackInventory(groups)
	if err != nil {
		return nil, tamper("head.json: retiredGroups: %v", err)
	}
	if len(ids) != len(states) {
		return nil, tamper("head.json: %d retiredStates for the %d objects of retiredGroups", len(states), len(ids))
	}
	rs := make([]receipts.Retired, len(ids))
	for i, s := range states {
		rs[i] = receipts.Retired{ID: ids[i], UID: s[0], ResourceVersion: s[1], ReviewedDigest: s[2], Outcome: s[3]}
	}
	return rs, nil
}

// headV2Current is current with the inventory packed: inventoryGroups in
// place of inventory.
type headV2Current struct {
	receipts.Deployment
	InventoryGroups []canon.InventoryGroup `json:"inventoryGroups"`
}

// Bytes is the canonical head.json as the Head is stored: the v1 form when
// it is at most HeadV1MaxBytes, else the v2 form.
func (h *Head) Bytes() ([]byte, error) {
	data, _, err := h.stored()
	return data, err
}

// listedIdentityMinBytes is the least an identity adds to the v1 text:
// {"apiVersion":"","kind":"","name":"","namespace":""} and a comma.
const listedIdentityMinBytes = 51

// stored is the stored head.json and its schema (see Bytes). An inventory
// whose identities alone make the v1 text too long is not encoded as v1 at
// all.
func (h *Head) stored() ([]byte, string, error) {
	if len(h.Current.Inventory)*listedIdentityMinBytes <= HeadV1MaxBytes {
		v1, err := h.encode(HeadSchema)
		if err != nil || len(v1) <= HeadV1MaxBytes {
			return v1, HeadSchema, err
		}
	}
	v2, err := h.encode(HeadSchemaV2)
	return v2, HeadSchemaV2, err
}

// encode writes h in the form of schema (HeadSchema or HeadSchemaV2). The
// logical Head's own schema member is always HeadSchema.
func (h *Head) encode(schema string) ([]byte, error) {
	if schema == HeadSchema {
		return inventory.Canonical(h)
	}
	w := headV2{Head: h, Schema: schema,
		Current: headV2Current{Deployment: h.Current.Deployment, InventoryGroups: canon.PackInventory(h.Current.Inventory)}}
	w.RetiredGroups, w.RetiredStates = packRetired(h.Retired)
	return inventory.Canonical(w)
}

// decodeHead strictly decodes head.json of either form into the logical
// Head and says which form it was. A v2 document's packed inventory must be
// the unique packing of what it decodes to; whether that inventory is
// sorted, unique, counted and digested is validate's (as for v1).
func decodeHead(data []byte) (*Head, string, error) {
	var peek struct {
		Schema string `json:"schema"`
	}
	if err := json.Unmarshal(data, &peek); err != nil {
		return nil, "", tamper("head.json: %v", err)
	}
	if peek.Schema != HeadSchemaV2 {
		var h Head
		if err := strictDecode(data, &h); err != nil {
			return nil, "", err
		}
		return &h, HeadSchema, nil
	}
	w := headV2{Head: &Head{}}
	if err := strictDecode(data, &w); err != nil {
		return nil, "", err
	}
	ids, err := canon.UnpackInventory(w.Current.InventoryGroups)
	if err != nil {
		return nil, "", tamper("head.json: current.inventoryGroups: %v", err)
	}
	if w.Current.InventoryGroups == nil {
		return nil, "", tamper("head.json: current.inventoryGroups is missing or null")
	}
	if w.Retired != nil {
		return nil, "", tamper("head.json: a v2 Head packs its retired list (retiredGroups, retiredStates); retired is listed")
	}
	h := w.Head
	if h.Retired, err = unpackRetired(w.RetiredGroups, w.RetiredStates); err != nil {
		return nil, "", err
	}
	h.Schema, h.Current = HeadSchema, HeadDeployment{Deployment: w.Current.Deployment, Inventory: ids}
	if ids == nil {
		h.Current.Inventory = []inventory.Identity{}
	}
	return h, HeadSchemaV2, nil
}

func strictDecode(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return tamper("head.json: %v", err)
	}
	if dec.More() {
		return tamper("head.json: trailing data")
	}
	return nil
}

// headSchemaLabel is the value of the label qinglong.io/head-schema for a
// Head stored in the form of schema.
func headSchemaLabel(schema string) string {
	if schema == HeadSchemaV2 {
		return LabelHeadSchemaValueV2
	}
	return LabelHeadSchemaValue
}
