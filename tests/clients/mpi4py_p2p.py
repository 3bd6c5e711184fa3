"""Point-to-point through mpi4py on Protean: pickled objects, buffers, nonblocking requests,
probe, and status fields. Run on 2 or more ranks; prints 'mpi4py p2p ok' from rank 0."""
import array
import sys

from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
assert size >= 2, "run on at least 2 ranks"
right, left = (rank + 1) % size, (rank - 1) % size

# Pickled objects around a ring.
obj = {"rank": rank, "data": list(range(rank, rank + 10))}
got = comm.sendrecv(obj, dest=right, sendtag=1, source=left, recvtag=1)
assert got == {"rank": left, "data": list(range(left, left + 10))}, got

# Buffers: a large one (rendezvous) and a small one, nonblocking.
n = 300_000
out = array.array("i", range(rank, rank + n))
inp = array.array("i", [0]) * n
reqs = [comm.Irecv([inp, MPI.INT], source=left, tag=2), comm.Isend([out, MPI.INT], dest=right, tag=2)]
MPI.Request.Waitall(reqs)
assert inp[0] == left and inp[-1] == left + n - 1

# Probe and status.
if rank == 0:
    comm.send("probe me", dest=1, tag=33)
elif rank == 1:
    st = MPI.Status()
    comm.probe(source=0, tag=MPI.ANY_TAG, status=st)
    assert st.Get_source() == 0 and st.Get_tag() == 33
    assert comm.recv(source=0, tag=33) == "probe me"

# Errors come back as exceptions under MPI_ERRORS_RETURN (mpi4py's default).
try:
    comm.send(1, dest=size + 5)
except MPI.Exception as e:
    assert e.Get_error_class() == MPI.ERR_RANK, e
else:
    sys.exit("sending to a rank out of range did not fail")

comm.Barrier()
if rank == 0:
    print("mpi4py p2p ok on", size, "ranks:", MPI.Get_library_version().split("\n")[0])
