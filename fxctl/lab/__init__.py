"""`fxctl lab`: QEMU guests with real NVMe-oF, Soft-RoCE, md RAID and XFS, on one Linux machine.

recipe -> kernel + rootfs -> image (cached by recipe key) ; topology -> ports -> seed -> qemu -> lab (up/down)
-> inventory (the running lab as an fxctl inventory, host keys pinned).
"""
