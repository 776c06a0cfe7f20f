"""Foreign VMs made into corral QEMU VMs: OVA/OVF (VirtualBox, VMware and other
exporters), VirtualBox machine folders and libvirt domain XML. :mod:`.xmlsafe` parses
their XML, :mod:`.ovf`, :mod:`.vbox` and :mod:`.libvirt_xml` read what they describe
(:class:`~.plan.Described`), :mod:`.package` finds the files, :mod:`.importer` plans
(:class:`~.plan.ImportPlan`, the summary) and imports."""

from .importer import Importer
from .plan import Described, DiskRef, ImportPlan

__all__ = ["Described", "DiskRef", "ImportPlan", "Importer"]
