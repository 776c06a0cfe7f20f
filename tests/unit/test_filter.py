import pytest

from backends.models import Instance, InstanceRef, InstanceState, InstanceStatus, InstanceType
from tui.filter import FilterError, matches, parse


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
    # remote= is an exact match, so lab does not match lab2
    assert not matches(parse("remote=lab"), inst("a"), None)


def test_unknown_key_is_explained():
    with pytest.raises(FilterError, match="unknown filter key 'colour'"):
        parse("colour=red")
