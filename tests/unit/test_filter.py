import pytest

from backends.models import Instance, InstanceRef, InstanceState, InstanceStatus, InstanceType
from tui.filter import FilterError, Term, matches, parse, why_empty


def inst(name, remote="lab2", status=InstanceStatus.RUNNING, t=InstanceType.CONTAINER,
         image="busybox"):
    return Instance(ref=InstanceRef(remote, name), type=t, status=status, image=image)


def test_substring_terms_match_name_remote_image_and_address():
    web = inst("web1")
    state = InstanceState(ipv4=("10.1.2.3",))
    assert matches(parse("web"), web, None)
    assert matches(parse("lab"), web, None)
    assert matches(parse("busy"), web, None)
    assert matches(parse("10.1.2"), web, state)
    assert not matches(parse("db"), web, None)


def test_key_value_terms_and_negation():
    vm = inst("v1", t=InstanceType.VM, status=InstanceStatus.STOPPED, remote="local")
    assert matches(parse("type=vm status=stopped remote=local"), vm, None)
    assert matches(parse("type=virtual-machine"), vm, None)
    assert not matches(parse("type=container"), vm, None)
    assert not matches(parse("status=running"), vm, None)
    assert matches(parse("!status=running"), vm, None)
    assert not matches(parse("!v1"), vm, None)



def test_one_rule_every_key_keeps_what_contains_its_value():
    """name=, status=, remote=, type= and plain words all keep what contains the value."""
    a = inst("s1x", status=InstanceStatus.STOPPED, remote="lab2")
    assert matches(parse("name=s1"), a, None)
    assert matches(parse("status=stop"), a, None)
    assert matches(parse("remote=lab"), a, None)
    assert matches(parse("type=cont"), a, None)
    assert matches(parse("status=paused"), inst("f", status=InstanceStatus.FROZEN), None)
    assert not matches(parse("status=run"), a, None)


def test_near_misses_are_named():
    with pytest.raises(FilterError, match="did you mean status=running"):
        parse("status=runing")
    with pytest.raises(FilterError, match="did you mean status\\?"):
        parse("stauts=running")
    with pytest.raises(FilterError, match="write status=running"):
        parse("status:running")
    with pytest.raises(FilterError, match="no type contains 'box'"):
        parse("type=box")
    # an address with colons is still a plain word
    assert parse("fd42:1::5") == [Term(None, "fd42:1::5")]


def test_a_term_that_hides_everything_is_explained():
    rows = [inst("s1"), inst("web")]
    note = why_empty(parse("!s"), rows, {})
    assert note is not None and "'!s' hides every instance" in note and "busybox" in note
    assert "no instance has 'zz'" in why_empty(parse("web zz"), rows, {})
    assert why_empty(parse("web"), rows, {}) is None


def test_unknown_key_is_explained():
    with pytest.raises(FilterError, match="unknown filter key 'colour'"):
        parse("colour=red")
