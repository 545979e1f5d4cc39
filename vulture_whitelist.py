# Names vulture (`make lint`) reports as unused that are used where it cannot see: by a framework,
# by a library reading an attribute, or by name. Only parsed by vulture, never run or imported.
# Code that is really unused is removed, not added here. Regenerate candidates with
#   .venv/bin/vulture --make-whitelist
# and add only the ones that are used after all, under the heading that says how.
# ruff: noqa

# -- called by name: the CLI's lazily loaded groups ("roost.cli.main:_node") --
_node  # roost/cli/main.py
_hub

# -- called by name: hypothesis' stateful rules and invariants, listed as strings --
_.send_right_mode  # tests/e2e/test_exactly_once.py
_.send_any
_.repeat_an_accepted_op
_.kill_the_daemon
_.kill_a_supervisor
_.stall_the_store
_.nothing_twice_nothing_unaccepted
_.teardown

# -- Textual: handlers, actions, bindings and styles the framework reads --
BINDINGS  # roost/cli/dashboard.py, roost/cli/tui_forms.py
DEFAULT_CSS
SCOPED_CSS
TITLE
_.compose
_.on_mount
_.on_unmount
_.on_feed_message
_.on_data_table_row_highlighted
_.on_input_changed
_.on_input_submitted
_.border_title
_.action_attach
_.action_spawn
_.action_prompt
_.action_stop
_.action_resume
_.action_forget
_.action_filter
_.action_clear_filter
_.action_cancel
_.action_answer
_.action_diff
_.action_help
_.action_scroll
_.action_close
_.on_resize

# -- http.server: the fake model API's handler and server settings (tests/fakes/model_api.py) --
daemon_threads
allow_reuse_address
protocol_version
_.log_message
_.close_connection
_.do_HEAD
_.do_GET
_.do_POST

# -- read by the library they are set on --
_.row_factory  # sqlite3 connections
_.tempdir  # tempfile.tempdir, set by a test (tests/unit/test_docs.py)
strict  # CPython's JSON scanner reads these of its decoder (roost/client/fast/nodefile.py)
object_hook
object_pairs_hook
parse_float
parse_int
_.parse_constant

# -- dataclass fields, read through asdict (roost/actors/state/records.py) --
workspace_id
updated
_.updated

# -- arguments a callback's signature requires --
signum  # signal handlers
domain  # the ZAP handler (roost/client/keys.py)
short_deadline  # a pytest fixture requested for its effect (tests/unit/test_group_commit.py)

# -- keys of TypedDicts: fields of a map another process reads (roost/wire/messages.py) --
duplicate
cost_usd  # roost/wire/usage.py: a Usage map read by the CLI and clients

# -- called by urllib: a handler's hook (tests/e2e/test_web.py, responses not followed) --
_.redirect_request
