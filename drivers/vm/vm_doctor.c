/* vm_doctor.c - the vm driver's doctor checks: can this user run a
 * virtual CPU (and is it a KVM that boots stock kernels), QEMU, and
 * qemu-img (templates). */
#include "vm.h"
#include "doctor.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/kvm.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

/* Can this user run a virtual CPU?  Open, API version, a VM with one page
 * of memory holding HLT, a vCPU, run it: it must stop on the HLT. */
static void check_kvm(struct pisb_doctor *d)
{
	const char *why = NULL, *fix = NULL;
	int kvm, vm = -1, vcpu = -1, en = 0;
	void *mem = MAP_FAILED;
	struct kvm_run *run = MAP_FAILED;
	long runsz = 0;

	kvm = open("/dev/kvm", O_RDWR | O_CLOEXEC);
	if (kvm < 0) {
		en = errno;
		why = "open /dev/kvm";
		fix = en == ENOENT
		      ? "enable virtualization (VT-x/AMD-V) in the firmware, or nested virtualization for a VM, and load kvm_intel or kvm_amd"
		      : "give this user access: sudo usermod -aG kvm $USER (with /dev/kvm group kvm, mode 0660: a udev rule KERNEL==\"kvm\", GROUP=\"kvm\", MODE=\"0660\"), then log in again";
		goto out;
	}
	if (ioctl(kvm, KVM_GET_API_VERSION, 0) != KVM_API_VERSION) {
		en = errno;
		why = "KVM_GET_API_VERSION";
		goto out;
	}
	vm = ioctl(kvm, KVM_CREATE_VM, 0);
	if (vm < 0) {
		en = errno;
		why = "KVM_CREATE_VM";
		fix = "the kernel refuses to create VMs (another hypervisor holding VT-x, or nested virtualization off)";
		goto out;
	}
	mem = mmap(NULL, 0x1000, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (mem == MAP_FAILED) {
		en = errno;
		why = "mmap";
		goto out;
	}
	((unsigned char *)mem)[0] = 0xf4; /* hlt */
	{
		struct kvm_userspace_memory_region r = {
			.slot = 0, .guest_phys_addr = 0x1000, .memory_size = 0x1000,
			.userspace_addr = (unsigned long)mem,
		};
		if (ioctl(vm, KVM_SET_USER_MEMORY_REGION, &r) < 0) {
			en = errno;
			why = "KVM_SET_USER_MEMORY_REGION";
			goto out;
		}
	}
	vcpu = ioctl(vm, KVM_CREATE_VCPU, 0);
	runsz = ioctl(kvm, KVM_GET_VCPU_MMAP_SIZE, 0);
	if (vcpu < 0 || runsz <= 0) {
		en = errno;
		why = "KVM_CREATE_VCPU";
		goto out;
	}
	run = mmap(NULL, (size_t)runsz, PROT_READ | PROT_WRITE, MAP_SHARED, vcpu, 0);
	if (run == MAP_FAILED) {
		en = errno;
		why = "mmap the vCPU";
		goto out;
	}
	{
		struct kvm_sregs s;
		struct kvm_regs g;
		if (ioctl(vcpu, KVM_GET_SREGS, &s) < 0) {
			en = errno;
			why = "KVM_GET_SREGS";
			goto out;
		}
		s.cs.base = 0;
		s.cs.selector = 0;
		memset(&g, 0, sizeof(g));
		g.rip = 0x1000;
		g.rflags = 2;
		if (ioctl(vcpu, KVM_SET_SREGS, &s) < 0 || ioctl(vcpu, KVM_SET_REGS, &g) < 0) {
			en = errno;
			why = "set the vCPU registers";
			goto out;
		}
	}
	if (ioctl(vcpu, KVM_RUN, 0) < 0) {
		en = errno;
		why = "KVM_RUN";
		goto out;
	}
	if (run->exit_reason != KVM_EXIT_HLT) {
		en = 0;
		why = "KVM_RUN (the guest did not stop on HLT)";
		goto out;
	}
out:
	if (run != MAP_FAILED)
		munmap(run, (size_t)runsz);
	if (mem != MAP_FAILED)
		munmap(mem, 0x1000);
	if (vcpu >= 0)
		close(vcpu);
	if (vm >= 0)
		close(vm);
	if (kvm >= 0)
		close(kvm);
	if (!why && pisb_vm_kvm_is_pvm())
		/* a vCPU runs to HLT, but PVM boots only kernels built for it */
		pisb_doctor_add(d, "kvm", PISB_DOC_WARN,
		     "use a guest kernel built with CONFIG_PVM_GUEST=y and CONFIG_X86_PIE=y (PISB_VM_KERNEL=/path/vmlinuz-VER with its config-VER beside it), or a host with VT-x/AMD-V (vmx/svm)",
		     "/dev/kvm is PVM (module kvm_pvm, no vmx/svm in /proc/cpuinfo): it runs only guest kernels built with CONFIG_PVM_GUEST, so the vm driver boots a stock kernel under TCG emulation at once, which is much slower");
	else if (!why)
		pisb_doctor_add(d, "kvm", PISB_DOC_PASS, NULL,
		     "/dev/kvm works: created a VM and ran a vCPU to HLT (the vm driver tries KVM first; when QEMU still cannot use it, it falls back to TCG and says so)");
	else
		pisb_doctor_add(d, "kvm", PISB_DOC_WARN, fix ? fix : "check dmesg for kvm errors",
		     "/dev/kvm is not usable: %s: %s; the vm driver falls back to TCG emulation, which is much slower",
		     why, en ? strerror(en) : "unexpected result");
}

void pisb_vm_doctor(struct pisb_doctor *d)
{
	char *qemu[] = { "qemu-system-x86_64", "--version", NULL };
	char *img[] = { "qemu-img", "--version", NULL };

	check_kvm(d);
	pisb_doctor_tool(d, "qemu", qemu, "the vm driver",
			 "sudo apt-get install qemu-system-x86 (Debian/Ubuntu) or sudo dnf install qemu-system-x86");
	/* a template's copy: a qcow2 overlay on the template's disk */
	pisb_doctor_tool(d, "qemu-img", img, "the vm driver's templates (create --template)",
			 "sudo apt-get install qemu-utils (Debian/Ubuntu) or sudo dnf install qemu-img");
}
