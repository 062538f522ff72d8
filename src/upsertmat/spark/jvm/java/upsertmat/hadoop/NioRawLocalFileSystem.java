package upsertmat.hadoop;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.attribute.PosixFilePermission;
import java.util.EnumSet;
import java.util.Set;

import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RawLocalFileSystem;
import org.apache.hadoop.fs.permission.FsAction;
import org.apache.hadoop.fs.permission.FsPermission;

/**
 * Hadoop's RawLocalFileSystem with setPermission done by a chmod(2) system call (java.nio)
 * instead of a chmod(1) process.
 *
 * <p>Without Hadoop's native library (pyspark ships none), RawLocalFileSystem forks the chmod
 * program for every file it creates and every permission it sets: a Spark micro-batch creates
 * about ten files (offsets, commits, the file source log and a state changelog per partition,
 * each with its checksum file), so about ten processes per batch, a few ms each, most of them on
 * the batch's critical path. The permission bits set are the same; a permission with the sticky
 * bit, which java.nio cannot express, still goes through the parent's chmod(1).
 */
public class NioRawLocalFileSystem extends RawLocalFileSystem {
  @Override
  public void setPermission(Path path, FsPermission permission) throws IOException {
    if (permission.getStickyBit()) {
      super.setPermission(path, permission);
      return;
    }
    Set<PosixFilePermission> bits = EnumSet.noneOf(PosixFilePermission.class);
    add(bits, permission.getUserAction(),
        PosixFilePermission.OWNER_READ, PosixFilePermission.OWNER_WRITE, PosixFilePermission.OWNER_EXECUTE);
    add(bits, permission.getGroupAction(),
        PosixFilePermission.GROUP_READ, PosixFilePermission.GROUP_WRITE, PosixFilePermission.GROUP_EXECUTE);
    add(bits, permission.getOtherAction(),
        PosixFilePermission.OTHERS_READ, PosixFilePermission.OTHERS_WRITE, PosixFilePermission.OTHERS_EXECUTE);
    Files.setPosixFilePermissions(pathToFile(path).toPath(), bits);
  }

  private static void add(
      Set<PosixFilePermission> bits, FsAction action,
      PosixFilePermission read, PosixFilePermission write, PosixFilePermission execute) {
    if (action.implies(FsAction.READ)) {
      bits.add(read);
    }
    if (action.implies(FsAction.WRITE)) {
      bits.add(write);
    }
    if (action.implies(FsAction.EXECUTE)) {
      bits.add(execute);
    }
  }
}
