# The sizes each workspace may create or change clusters to. A workspace not listed gets `default_sizes`.
package main

import rego.v1

allowed_sizes_by_workspace := {
	"mlw-prod": {"Standard_ND96asr_v4", "Standard_ND96amsr_A100_v4", "Standard_ND96isr_H100_v5"},
	"mlw-dev": {"Standard_NC6s_v3", "Standard_NC24ads_A100_v4", "Standard_DS3_v2"},
}

default_sizes := {"Standard_NC6s_v3", "Standard_DS3_v2"}

allowed_sizes := object.get(allowed_sizes_by_workspace, input.workspace.name, default_sizes)

deny contains msg if {
	some rc in input.resource_changes
	rc.type == "cluster"
	some action in rc.change.actions
	action in {"create", "update"}
	size := rc.change.after.size
	not size in allowed_sizes
	allowed := concat(", ", sort([s | some s in allowed_sizes]))
	msg := concat("", [rc.address, ": size ", size, " is not allowed in workspace ", input.workspace.name,
		" (allowed: ", allowed, ")"])
}
