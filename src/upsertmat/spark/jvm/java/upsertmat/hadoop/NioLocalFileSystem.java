package upsertmat.hadoop;

import org.apache.hadoop.fs.LocalFileSystem;

/**
 * Hadoop's LocalFileSystem (checksummed: a .crc file beside each file, as the default) over
 * {@link NioRawLocalFileSystem}. Spark's RocksDB state store requires a LocalFileSystem.
 */
public class NioLocalFileSystem extends LocalFileSystem {
  public NioLocalFileSystem() {
    super(new NioRawLocalFileSystem());
  }
}
