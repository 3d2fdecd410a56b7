"""An endpoint's life: its fields, create/update/delete, delivery auth, options, version
pins, the CloudEvents validation, suspension, test events and who may change what."""
