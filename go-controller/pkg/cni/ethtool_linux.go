package cni

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ethtoolSTXCSUM is ETHTOOL_STXCSUM from linux/ethtool.h.
const ethtoolSTXCSUM = 0x00000017

type ethtoolValue struct {
	cmd  uint32
	data uint32
}

type ifreqData struct {
	name [unix.IFNAMSIZ]byte
	data unsafe.Pointer
	_    [16]byte
}

// disableTxChecksum turns off TX checksum offload on an interface of the
// current network namespace (`ethtool -K IFACE tx off`). On OVS's userspace
// datapath a veth with offload on sends TCP and UDP with bad checksums.
func disableTxChecksum(iface string) error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("socket for ethtool: %w", err)
	}
	defer unix.Close(fd)
	val := ethtoolValue{cmd: ethtoolSTXCSUM, data: 0}
	var req ifreqData
	copy(req.name[:], iface)
	req.data = unsafe.Pointer(&val)
	if _, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SIOCETHTOOL, uintptr(unsafe.Pointer(&req))); errno != 0 {
		return fmt.Errorf("disabling TX checksum offload on %s: %w", iface, errno)
	}
	return nil
}
