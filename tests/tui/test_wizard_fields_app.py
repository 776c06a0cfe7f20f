"""The launch wizard draws a create source's own fields (``CreateSource.fields``), in order,
knowing nothing of source kinds: a path on the remote's host passed as typed, a line of
text, a choice; their answers arrive in the request (``""`` as the source's value, every
other key in ``options``). A required field left empty keeps *Next* disabled, in words;
a path on this machine that does not exist is refused, in words. Keys typed in one burst
after a source is chosen land in its fields, in order (posted at once, as in
``test_every_key.py``)."""

from __future__ import annotations

from textual.widgets import Input, Select

from backends.fake import FakeBackend
from backends.models import InstanceType, Remote
from backends.create_models import CreateSource, SourceField
from tui.app import make_app
from tui.screens.main import MainScreen
from tui.screens.wizard import WizardScreen

from .test_every_key import burst, typed
from .test_fake_app import settle
from .test_real_app import wait_for

ON_SERVER = CreateSource(
    "their-own-kind", "A disk on the server", type=InstanceType.VM,
    fields=(SourceField("", "Disk", "path on the server", required=True, path="remote"),
            SourceField("cmdline", "Command line", "e.g. console=ttyS0"),
            SourceField("firmware", "Firmware", choices=(("bios", "BIOS"), ("uefi", "UEFI")),
                        default="uefi")))
LOCAL = CreateSource("another-kind", "A file here", type=InstanceType.VM,
                     fields=(SourceField("", "File", "path here", required=True,
                                         path="local"),))


class FieldsFake(FakeBackend):
    async def create_sources(self) -> list[CreateSource]:
        if self.remote.name == "empty":
            return []
        return [*await super().create_sources(), ON_SERVER, LOCAL]


def fields_app(tmp_path, *others: str):
    """corral on a fake remote ``alpha`` with the sources above (and ``others``; one
    named ``empty`` offers no source)."""
    cfg = tmp_path / "config.toml"
    cfg.write_text(
        '[ui]\nmetrics_interval = 600\n[lxc]\nenabled = false\n[qemu]\nenabled = false\n'
        + "".join(f'[[remote]]\nname = "{name}"\nkind = "lxd"\n'
                  f'address = "/nonexistent/{name}.sock"\n' for name in ("alpha", *others)))
    made: dict[str, FieldsFake] = {}

    def factory(remote: Remote, timeout: float):
        made[remote.name] = FieldsFake(remote, instances=[])
        return made[remote.name]

    env = {"HOME": str(tmp_path), "LXD_SOCKET": str(tmp_path / "no.sock"),
           "INCUS_SOCKET": str(tmp_path / "no2.sock")}
    return make_app(cfg, env=env, factory=factory), made


async def what_step(pilot, app) -> WizardScreen:
    burst(app, "N", "enter")  # the wizard, its only remote
    await wait_for(pilot, lambda: isinstance(app.screen, WizardScreen)
                   and app.screen.step == "what", what="the 'what' step")
    return app.screen


def problem(app) -> str:
    return str(app.screen.query_one("#wizard-problem").render())


def created(backend: FieldsFake):
    return [c[2]["request"] for c in backend.calls if c[0] == "create"]


async def test_a_sources_fields_reach_the_request_and_are_checked(tmp_path):
    app, made = fields_app(tmp_path)
    async with app.run_test(size=(140, 45)) as pilot:
        await settle(pilot, app)
        wizard = await what_step(pilot, app)
        index = [s.label for s in wizard.sources].index(ON_SERVER.label)
        # in one burst: down to the source, enter (its first field), the path, tab, text
        burst(app, *["down"] * index, "enter", *typed("/srv/disk.qcow2"), "tab",
              *typed("console=ttyS0 quiet"))
        await wait_for(pilot, lambda: wizard.query("#wizard-field-cmdline")
                       and wizard.query_one("#wizard-field-cmdline", Input).value
                       == "console=ttyS0 quiet", what="the command line typed")
        assert wizard.query_one("#wizard-field-value", Input).value == "/srv/disk.qcow2"
        assert wizard.query_one("#wizard-field-firmware", Select).value == "uefi"
        assert [type(w).__name__ for w in wizard.query("#wizard-fields Input, "
                                                       "#wizard-fields Select")] \
            == ["PlainInput", "PlainInput", "Select"]  # in order; no completion on the server
        assert not wizard.query_one("#next").disabled

        # a required field left empty: Next disabled, with the reason
        burst(app, "shift+tab", "ctrl+u")
        await wait_for(pilot, lambda: wizard.query_one("#next").disabled,
                       what="Next disabled")
        assert problem(app) == "Disk: give its path."
        assert wizard.step == "what"
        burst(app, "ctrl+n")  # refused, nothing moves on
        await settle(pilot, app)
        assert wizard.step == "what"
        burst(app, *typed("/srv/disk.qcow2"))
        wizard.query_one("#wizard-field-firmware", Select).value = "bios"
        await wait_for(pilot, lambda: not wizard.query_one("#next").disabled,
                       what="Next enabled again")

        # through the steps; the summary shows each field by its label
        burst(app, "ctrl+n", *typed("srv1"), "enter", "ctrl+n", "ctrl+n", "ctrl+n")
        await wait_for(pilot, lambda: wizard.step == "summary",
                       what=lambda: f"the summary ({problem(app)})")
        summary = str(wizard.query_one("#wizard-summary").render())
        for needle in ("A disk on the server", "Disk  /srv/disk.qcow2",
                       "Command line  console=ttyS0 quiet", "Firmware  BIOS"):
            assert needle in summary, (needle, summary)
        burst(app, "ctrl+n")
        await wait_for(pilot, lambda: isinstance(app.screen, MainScreen),
                       what="the wizard done")
        [request] = created(made["alpha"])
        assert request.source.kind == "their-own-kind"
        assert request.source.value == "/srv/disk.qcow2"  # as typed: the server's path
        assert {k: v for k, v in request.options.items() if k != "target"} == {
            "cmdline": "console=ttyS0 quiet", "firmware": "bios"}


async def test_a_local_path_that_does_not_exist_is_refused_in_words(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))  # where the wizard's ~ points
    app, made = fields_app(tmp_path)
    (tmp_path / "disk.img").write_bytes(b"\0" * 512)
    async with app.run_test(size=(140, 45)) as pilot:
        await settle(pilot, app)
        wizard = await what_step(pilot, app)
        index = [s.label for s in wizard.sources].index(LOCAL.label)
        burst(app, *["down"] * index, "enter", *typed(str(tmp_path / "nowhere.img")))
        await wait_for(pilot, lambda: "nowhere.img" in problem(app),
                       what=lambda: f"the refusal ({problem(app)!r})")
        assert problem(app) == f"File: no such file on this machine: {tmp_path}/nowhere.img"
        assert wizard.query_one("#next").disabled
        burst(app, "enter")  # Enter in the field does not go on either
        await settle(pilot, app)
        assert wizard.step == "what"
        # ~ is this user's home
        burst(app, "ctrl+u", *typed("~/disk.img"), "enter")
        await wait_for(pilot, lambda: wizard.step == "name",
                       what=lambda: f"the name step ({problem(app)})")
        assert wizard.request().source.value == str(tmp_path / "disk.img")
        # another source drawn in its place: the fields are the new source's, and back
        # on this one what was typed is still there
        burst(app, "ctrl+b")
        await wait_for(pilot, lambda: wizard.step == "what", what="back on 'what'")
        burst(app, "up")
        await wait_for(pilot, lambda: wizard.query("#wizard-field-cmdline"),
                       what="the other source's fields")
        burst(app, "down")
        await wait_for(pilot, lambda: not wizard.query("#wizard-field-cmdline")
                       and wizard.query("#wizard-field-value"), what="this one's again")
        assert wizard.query_one("#wizard-field-value", Input).value == "~/disk.img"
        # a source with no fields draws none
        burst(app, *["up"] * index)
        await wait_for(pilot, lambda: not wizard.query("#wizard-fields Input"),
                       what="no fields")
        assert not wizard.query_one("#next").disabled


async def test_another_remote_draws_none_of_the_last_ones_fields(tmp_path):
    app, made = fields_app(tmp_path, "empty")
    async with app.run_test(size=(140, 45)) as pilot:
        await settle(pilot, app)
        wizard = await what_step(pilot, app)  # alpha, the first remote
        assert wizard.remote == "alpha"
        index = [s.label for s in wizard.sources].index(ON_SERVER.label)
        burst(app, *["down"] * index, "enter", *typed("/srv/x"))
        await wait_for(pilot, lambda: wizard.query("#wizard-field-value")
                       and wizard.query_one("#wizard-field-value", Input).value == "/srv/x",
                       what="the path typed")
        burst(app, "ctrl+b", "down", "enter")  # back, the remote that offers nothing
        await wait_for(pilot, lambda: wizard.step == "what" and wizard.remote == "empty",
                       what="the 'what' step of the other remote")
        await wait_for(pilot, lambda: not wizard.query("#wizard-fields Input"),
                       what="no fields of alpha's source")
        assert wizard.sources == [] and wizard.query_one("#next").disabled
        assert problem(app) == "Choose what to create the instance from."
